"""An HTTP/1.1 port: listens on one address and serves each connection with `HttpConnection`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytriton.config.http1 import HttpLimits
from pytriton.config.tls import TlsSettings
from pytriton.frontend._listen import listen
from pytriton.frontend.http1.budget import BufferBudget
from pytriton.frontend.http1.connection import HttpConnection
from pytriton.frontend.http1.messages import Begin, Handler, HttpResponse
from pytriton.frontend.http1.reader import SharedReadBuffer
from pytriton.frontend.tls import TlsAcceptor, server_context

if TYPE_CHECKING:
    from pytriton.core.received import ReceivedBuffers

logger = logging.getLogger("pytriton.frontend")


class HttpListener:
    """Serves `handler` on `address:port` (the HTTP front-end's app, the metrics app). Owns its connections, the
    read buffer and the memory budget they share, and the tick that holds them to their deadlines (`HttpLimits`)."""

    def __init__(
        self,
        handler: Handler,
        address: str,
        port: int,
        name: str,
        limits: HttpLimits | None = None,
        too_large_hint: str = "",
        protocol: str = "HTTP",
        reuse_port: bool = False,
        tls: TlsSettings | None = None,
        received: ReceivedBuffers | None = None,
        begin: Begin | None = None,
        refusal: Callable[[int, str], HttpResponse] | None = None,
    ):
        self.handler = handler
        self.refusal = refusal  # the answer to a request refused unread (default: Triton's `{"error": msg}`)
        self.begin = begin  # answers requests without the handler's coroutine where it can (`HttpConnection`)
        self.received = received  # the core's receive buffers: large binary infer bodies go there
        self.tls = tls  # HTTPS (and client certificates) on the port; None: plain text
        self._acceptor: TlsAcceptor | None = None
        self.address = address
        self.requested_port = port
        self.name = name  # in the log line: "Started <name> at ..."
        self.protocol = protocol  # in the error when the port is taken: "cannot listen for <protocol> on ..."
        self.limits = limits or HttpLimits()
        self.reuse_port = reuse_port
        self.too_large_hint = too_large_hint  # appended to the 413 message, e.g. which option raises the limit
        self.port: int | None = None
        self._server: asyncio.base_events.Server | None = None
        self._ticker: asyncio.Task[Any] | None = None
        self._connections: set[HttpConnection] = set()
        self._read_buffer = SharedReadBuffer()
        self.budget = BufferBudget(self.limits.max_buffered_bytes, name)  # request bodies in memory, all connections

    @property
    def buffered_bytes(self) -> int:
        """Bytes of request bodies its connections hold now (charged to `budget`)."""
        return self.budget.used

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def _connection(self) -> HttpConnection:
        connection = HttpConnection(self.handler, self.limits, self._read_buffer, self._connections,
                                    self.too_large_hint, self.budget, self.begin)
        if self.refusal is not None:
            connection.refusal = self.refusal
        if self.received is not None and self.received.enabled:
            connection.received = self.received
        return connection

    async def start(self) -> int:
        factory: Callable[[], asyncio.BaseProtocol] = self._connection
        if self.tls is not None:  # the certificate is loaded now: a bad file fails the start
            context = server_context(self.tls, ["http/1.1"])
            self._acceptor = TlsAcceptor(context, self.limits.header_timeout_s, self.protocol)
            factory = self._acceptor.wrap(factory)
        self._server, self.port = await listen(factory, self.address, self.requested_port, self.protocol,
                                               self.name, self.reuse_port)
        if self._acceptor is not None:
            self._acceptor.port = f"{self.protocol} port {self.port}"
        if self.tls is not None:
            logger.info("%s port %d: TLS%s", self.protocol, self.port,
                        ", client certificates required" if self.tls.mutual else "")
        self._ticker = asyncio.get_running_loop().create_task(self._tick())
        return self.port

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        period = self.limits.tick_s
        while True:
            await asyncio.sleep(period)
            now = loop.time()
            for connection in list(self._connections):
                try:
                    connection.tick(now)
                except Exception:  # one connection's failure must not stop the others' deadlines
                    logger.exception("HTTP connection from %s: deadline handling failed", connection.peer)
                    if connection.transport is not None:
                        connection.transport.abort()

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._acceptor is not None:
            self._acceptor.close()
        if self._server is not None:
            self._server.close()
            for connection in list(self._connections):
                if connection.transport is not None:
                    connection.transport.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except asyncio.TimeoutError:  # clients that do not take what is left to send
                for connection in list(self._connections):
                    if connection.transport is not None:
                        connection.transport.abort()
            self._server = None
