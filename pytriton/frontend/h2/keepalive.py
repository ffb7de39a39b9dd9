"""The server's keepalive PINGs, as grpc core sends them (doc/keepalive.md in grpc): a PING once nothing has been
read from the client for `keepalive_time_s`, the connection closed when its acknowledgement does not come within
`keepalive_timeout_s`. No PING goes out on a connection without calls unless `keepalive_permit_without_calls`, nor
more than `max_pings_without_data` of them while we send no HEADERS or DATA; a blocked PING is tried again a
keepalive time later.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING

from pytriton.config.h2 import H2Limits, PingPolicy
from pytriton.frontend.h2.frames import NO_ERROR, PING, frame_header

if TYPE_CHECKING:
    from pytriton.frontend.h2.connection import GrpcConnection

_PAYLOADS = itertools.count(1)


class Keepalive:
    """One connection's keepalive timer and watchdog. The connection sets `last_read` as bytes arrive, calls
    `start` once connected, `acked` with each PING acknowledgement's payload and `stop` when it is lost."""

    __slots__ = ("_connection", "_loop", "_time", "_timeout", "_permit", "_max_without_data", "_policy", "_timer",
                 "_payload", "_ack_due", "last_read", "sent")

    def __init__(self, connection: GrpcConnection, limits: H2Limits, policy: PingPolicy):
        self._connection = connection
        self._loop = loop = connection.loop
        self._time = limits.keepalive_time_s
        self._timeout = limits.keepalive_timeout_s
        self._permit = limits.keepalive_permit_without_calls
        self._max_without_data = limits.max_pings_without_data
        self._policy = policy
        self._timer: asyncio.TimerHandle | None = None
        self._payload = b""
        self._ack_due: float | None = None  # a keepalive PING is out: its acknowledgement is due by then
        self.last_read = loop.time()
        self.sent = 0  # keepalive PINGs sent on this connection

    def start(self) -> None:
        if self._time is not None:
            self._timer = self._loop.call_at(self.last_read + self._time, self._fire)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def acked(self, payload: bytes) -> None:
        """A PING acknowledgement came; ours ends the watchdog, and the next PING is due a keepalive time later."""
        if self._ack_due is None or payload != self._payload:
            return
        self._ack_due = None
        self.stop()
        self.start()

    def _fire(self) -> None:
        self._timer = None
        assert self._time is not None
        now = self._loop.time()
        if self._ack_due is not None:
            if now >= self._ack_due:
                self._lost(f"keepalive PING not acknowledged within {self._timeout:g} s")
                return
            self._timer = self._loop.call_at(self._ack_due, self._fire)
            return
        due = self.last_read + self._time
        if now < due:  # read from the client since: not yet
            self._timer = self._loop.call_at(due, self._fire)
            return
        transport = self._connection.transport
        if transport is None or transport.is_closing():
            return
        if (self._permit or self._connection.streams) and self._policy.may_send(self._max_without_data):
            self._payload = next(_PAYLOADS).to_bytes(8, "big")
            self._policy.sent_without_data += 1
            self.sent += 1
            self._ack_due = now + self._timeout
            transport.write(frame_header(8, PING, 0, 0) + self._payload)
            self._timer = self._loop.call_at(self._ack_due, self._fire)
        else:  # blocked: tried again a keepalive time later (as grpc core)
            self._timer = self._loop.call_at(now + self._time, self._fire)

    def _lost(self, reason: str) -> None:
        """No acknowledgement: the client is gone or stuck. GOAWAY, calls cancelled, and no lingering for it."""
        connection = self._connection
        connection._fail(NO_ERROR, reason)
        if connection.transport is not None:
            connection.transport.abort()
