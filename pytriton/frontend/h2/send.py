"""Frames out: response headers, messages and trailers within the client's flow-control windows, control frames,
and the one path by which a response's buffers are given back (`on_sent`).

A response message is queued on its stream as views of its buffers followed by its `on_sent` callable. The
callable is called exactly once, when the transport no longer needs the bytes: right after the write when the
socket took everything, else at `resume_writing` (the connection's `DirectWriteTransport` keeps views of unsent data),
or when the stream is reset or the connection lost before the bytes went out.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

import grpc

from pytriton.config.h2 import PingPolicy
from pytriton.frontend.h2.frames import (
    DATA,
    END_HEADERS,
    END_STREAM,
    ENHANCE_YOUR_CALM,
    HEADERS,
    RESPONSE_HEADERS,
    RESPONSE_HEADERS_GZIP,
    TRAILERS_OK,
    H2ConnectionError,
    frame_header,
    status_block,
)
from pytriton.frontend.h2.stream import (
    CLOSED,
    HALF_CLOSED_LOCAL,
    HALF_CLOSED_REMOTE,
    OPEN,
    SEND_DATA,
    SEND_END_STREAM,
    SEND_HEADERS,
    Stream,
    transition,
)

logger = logging.getLogger("pytriton.frontend")

STREAM_SEND_BACKLOG = 4 << 20  # a streaming handler waits while this much of its output awaits the client,
STREAM_SEND_MESSAGES = 4096  # or this many of its messages (small ones cost more than their bytes)
LARGE_PART = 64 * 1024  # a response buffer at least this large is written on its own, not joined
_HEADERS_FRAME = frame_header(len(RESPONSE_HEADERS), HEADERS, END_HEADERS, 0)[:5]  # + stream id
_GZIP_HEADERS_FRAME = frame_header(len(RESPONSE_HEADERS_GZIP), HEADERS, END_HEADERS, 0)[:5]
_TRAILERS_OK_FRAME = frame_header(len(TRAILERS_OK), HEADERS, END_HEADERS | END_STREAM, 0)[:5]
_DATA_NO_FLAGS = bytes([DATA, 0])  # a DATA frame's type and flags (after its 3-byte length, before its stream id)

OnSent = Callable[[], None]


def _size(part: Any) -> int:
    return part.nbytes if isinstance(part, memoryview) else len(part)


def _as_bytes_view(part: Any) -> memoryview:
    view = part if isinstance(part, memoryview) else memoryview(part)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
    return view


def _nothing_to_release() -> None:
    """Ends a queued message that owns no buffers (each message in `Stream.pending` ends with a callable)."""


def run_releases(callbacks: list[OnSent]) -> None:
    for on_sent in callbacks:
        try:
            on_sent()
        except Exception:  # noqa: BLE001 - one owner's failure must not keep the others' buffers
            logger.exception("releasing a response's buffers failed")


class Outbox:
    """Everything one connection writes. `ended(stream)` is called when a stream's END_STREAM has gone out."""

    def __init__(self, ended: Callable[[Stream], None], ping_policy: PingPolicy, max_pending_control: int):
        self.transport: asyncio.Transport | None = None
        self.window = 65535  # the connection-level window the client gave us
        self.initial_window = 65535  # the client's SETTINGS_INITIAL_WINDOW_SIZE (new streams' send windows)
        self.max_frame = 16384  # the client's SETTINGS_MAX_FRAME_SIZE
        self.blocked: dict[int, Stream] = {}  # streams with output waiting for a window
        self._held: list[OnSent] = []  # releases of buffers the transport may still hold (until resume_writing)
        self._paused = False
        self._pending_control = 0
        self._max_pending_control = max_pending_control
        self._ping_policy = ping_policy
        self._ended = ended

    # ---- the transport's buffer ---------------------------------------------------------------------------------
    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False
        self._pending_control = 0
        held, self._held = self._held, []
        run_releases(held)

    def lost(self) -> None:
        """The connection is gone (asyncio has dropped what it held): every buffer goes back now."""
        self.transport = None
        self.blocked.clear()
        self.resume()

    def release(self, callbacks: list[OnSent]) -> None:
        """Give buffers back: now if the transport holds none of our bytes, else once it has sent them all."""
        transport = self.transport
        if transport is None or not transport.get_write_buffer_size():
            run_releases(callbacks)
        else:
            self._held.extend(callbacks)

    def control(self, frame: bytes) -> None:
        """Write a frame the client's own frames made us send (an acknowledgement, a RST_STREAM). A client that
        keeps asking without reading the answers is cut off before they pile up."""
        if self.transport is None:
            return
        if self._paused:
            self._pending_control += 1
            if self._pending_control > self._max_pending_control:
                raise H2ConnectionError(
                    ENHANCE_YOUR_CALM, "too many control frames queued for a client that does not read"
                )
        self.transport.write(frame)

    # ---- responses ------------------------------------------------------------------------------------------------
    def message(self, stream: Stream, parts: list[Any], on_sent: OnSent | None, last: bool = False,
                compressed: bool = False) -> None:
        """Send one response message (`compressed`: with the compressed flag); with `last` the call ends OK after it
        (a unary answer: headers, message and trailers in one write when the windows allow it)."""
        if stream.trailers is not None or stream.state >= HALF_CLOSED_LOCAL or self.transport is None:
            if on_sent is not None:  # the call is over (ended, reset, the connection lost): nothing more goes out
                self.release([on_sent])
            return
        size = 0
        for part in parts:
            size += part.nbytes if type(part) is memoryview else len(part)
        if (last and stream.state == HALF_CLOSED_REMOTE and stream.gzip_level is None and not compressed
                and not stream.pending and size + 5 <= min(self.window, stream.send_window, self.max_frame)
                and size < LARGE_PART):
            self._unary_answer(stream, parts, size, on_sent)
            return
        out: list[Any] = []
        if stream.state == OPEN or stream.state == HALF_CLOSED_REMOTE:
            stream.state = transition(stream.id, stream.state, SEND_HEADERS)
            if stream.gzip_level is None:
                out.append(_HEADERS_FRAME + stream.id.to_bytes(4, "big") + RESPONSE_HEADERS)
            else:
                out.append(_GZIP_HEADERS_FRAME + stream.id.to_bytes(4, "big") + RESPONSE_HEADERS_GZIP)
        prefix = (b"\x01" if compressed else b"\x00") + size.to_bytes(4, "big")
        policy = self._ping_policy
        policy.answered = True
        policy.sent_without_data = 0
        if not stream.pending and size + 5 <= min(self.window, stream.send_window, self.max_frame):
            stream.state = transition(stream.id, stream.state, SEND_DATA)
            out.append(frame_header(size + 5, DATA, 0, stream.id) + prefix)  # all of it in one frame, now
            out.extend(parts)
            self.window -= size + 5
            stream.send_window -= size + 5
            if last:
                stream.trailers = TRAILERS_OK
                stream.state = transition(stream.id, stream.state, SEND_END_STREAM)
                out.append(_TRAILERS_OK_FRAME + stream.id.to_bytes(4, "big") + TRAILERS_OK)
            self._write(out, [on_sent] if on_sent is not None else [])
            if last:
                self._ended(stream)
            return
        if out:
            self._write(out, [])
        stream.pending.append(memoryview(prefix))
        for part in parts:
            if _size(part):
                stream.pending.append(_as_bytes_view(part))
        stream.pending.append(on_sent if on_sent is not None else _nothing_to_release)
        stream.pending_size += size + 5
        stream.pending_messages += 1
        self.flush(stream)
        if last:
            self.finish(stream, grpc.StatusCode.OK, "")

    def _unary_answer(self, stream: Stream, parts: list[Any], size: int, on_sent: OnSent | None) -> None:
        """`message` of a whole small unary answer (the request has ended, nothing was sent on the stream, the windows
        take it all): headers, the message and the OK trailers joined into one write, and the stream's state set as
        the three frames leave it (HEADERS, DATA, END_STREAM sent: closed)."""
        policy = self._ping_policy
        policy.answered = True
        policy.sent_without_data = 0
        self.window -= size + 5
        stream.send_window -= size + 5
        stream.trailers = TRAILERS_OK
        stream.state = CLOSED
        sid = stream.id.to_bytes(4, "big")
        self.transport.write(b"".join([  # type: ignore[union-attr]  # connected while streams send
            _HEADERS_FRAME, sid, RESPONSE_HEADERS,
            (size + 5).to_bytes(3, "big"), _DATA_NO_FLAGS, sid, b"\x00", size.to_bytes(4, "big"), *parts,
            _TRAILERS_OK_FRAME, sid, TRAILERS_OK,
        ]))  # fmt: skip
        if on_sent is not None:
            self.release([on_sent])
        self._ended(stream)

    def finish(self, stream: Stream, code: grpc.StatusCode, message: str) -> None:
        """End the call with this status (after any output still waiting for a window)."""
        if stream.trailers is not None or stream.state >= HALF_CLOSED_LOCAL:
            return
        if stream.state == OPEN or stream.state == HALF_CLOSED_REMOTE:  # trailers-only response
            stream.trailers = RESPONSE_HEADERS + status_block(code, message)
        else:
            stream.trailers = TRAILERS_OK if code is grpc.StatusCode.OK and not message else status_block(code, message)
        self.flush(stream)

    def flush(self, stream: Stream) -> None:
        """Send what the windows allow of the stream's pending output; then its trailers."""
        out: list[Any] = []
        sent: list[OnSent] = []
        pending = stream.pending
        while pending:
            if callable(pending[0]):  # a message's last byte is in `out`
                sent.append(pending.popleft())  # type: ignore[arg-type]  # callable(pending[0]) held
                stream.pending_messages -= 1
                continue
            room = min(self.window, stream.send_window, self.max_frame)
            if room <= 0:
                break
            frame: list[Any] = []
            size = 0
            while pending and size < room:
                chunk = pending[0]
                if callable(chunk):
                    sent.append(pending.popleft())  # type: ignore[arg-type]  # callable(chunk) held
                    stream.pending_messages -= 1
                    continue
                take = min(len(chunk), room - size)
                if take == len(chunk):
                    frame.append(pending.popleft())
                else:
                    frame.append(chunk[:take])
                    pending[0] = chunk[take:]
                size += take
            stream.state = transition(stream.id, stream.state, SEND_DATA)
            out.append(frame_header(size, DATA, 0, stream.id))
            out.extend(frame)
            self.window -= size
            stream.send_window -= size
            stream.pending_size -= size
            self._ping_policy.answered = True
            self._ping_policy.sent_without_data = 0
        ended = False
        if pending:
            self.blocked[stream.id] = stream
        else:
            self.blocked.pop(stream.id, None)
            trailers = stream.trailers
            if trailers is not None:
                if stream.state == OPEN or stream.state == HALF_CLOSED_REMOTE:
                    stream.state = transition(stream.id, stream.state, SEND_HEADERS)
                if len(trailers) > self.max_frame:  # a long status message: cut to fit one frame
                    trailers = trailers[: self.max_frame]
                stream.state = transition(stream.id, stream.state, SEND_END_STREAM)
                out.append(frame_header(len(trailers), HEADERS, END_HEADERS | END_STREAM, stream.id) + trailers)
                ended = True
                self._ping_policy.answered = True  # HEADERS sent (a trailers-only answer too)
                self._ping_policy.sent_without_data = 0
        if out or sent:
            self._write(out, sent)
        if stream.drained is not None and (ended or (stream.pending_size <= STREAM_SEND_BACKLOG // 2 and
                                                     stream.pending_messages <= STREAM_SEND_MESSAGES // 2)):
            if not stream.drained.done():
                stream.drained.set_result(None)
            stream.drained = None
        if ended:
            self._ended(stream)

    def flush_blocked(self) -> None:
        if not self.blocked:  # the common case (a WINDOW_UPDATE with nothing waiting for it)
            return
        for stream in list(self.blocked.values()):
            if self.window <= 0:
                return
            self.flush(stream)

    def drop(self, stream: Stream) -> None:
        """The stream is gone before its output was sent: its messages' buffers go back (once the transport holds
        none of their bytes: a message may be partly written)."""
        self.blocked.pop(stream.id, None)
        released = [item for item in stream.pending if callable(item)]
        stream.pending.clear()
        stream.pending_size = 0
        stream.pending_messages = 0
        if released:
            self.release(released)

    def _write(self, out: list[Any], sent: list[OnSent]) -> None:
        """Write frames and buffers in order, then release `sent` (see `release`)."""
        transport = self.transport
        if transport is None:
            run_releases(sent)
            return
        small: list[Any] = []
        for part in out:
            if (part.nbytes if type(part) is memoryview else len(part)) < LARGE_PART:
                small.append(part)
                continue
            # A tensor goes out on its own, straight from its buffer (a join would copy all of it first).
            if small:
                transport.write(small[0] if len(small) == 1 else b"".join(small))
                small = []
            transport.write(part)
        if small:
            transport.write(small[0] if len(small) == 1 else b"".join(small))
        if sent:
            self.release(sent)
