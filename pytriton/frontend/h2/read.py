"""Bytes in, frames out: the reading half of the HTTP/2 connection.

One read buffer per connection, which grows only when the bytes received fill it (never to a length a frame
header declares) and goes away while the connection is idle. Each frame's header is checked before its payload
is buffered: its length against the limit of its type, its stream identifier against the rules of its type.
DATA payloads are streamed to their stream as they arrive (a large message is even received by the socket
straight into its own buffer); unknown frame types are skipped as they arrive. Frames themselves are handled by
the subclass (`GrpcConnection`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from pytriton.config.h2 import H2Limits, RateBudget
from pytriton.frontend.h2.call import DIRECT_MIN
from pytriton.frontend.h2.frames import (
    ACK,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    ENHANCE_YOUR_CALM,
    FLOW_CONTROL_ERROR,
    FRAME,
    FRAME_SIZE_ERROR,
    GOAWAY,
    HEADERS,
    INTERNAL_ERROR,
    MAX_MAX_FRAME,
    MIN_MAX_FRAME,
    PADDED,
    PING,
    PREFACE,
    PRIORITY_FLAG,
    PROTOCOL_ERROR,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    H2ConnectionError,
    H2StreamError,
    window_update_frame,
)
from pytriton.frontend.h2.stream import Stream

if TYPE_CHECKING:
    from pytriton.frontend.h2.call import GrpcCalls
    from pytriton.frontend.h2.keepalive import Keepalive
    from pytriton.frontend.h2.send import Outbox

logger = logging.getLogger("pytriton.frontend")

READ_BUFFER = 64 * 1024  # the read buffer of a busy connection (large messages bypass it)
FIRST_READ_BUFFER = 4 * 1024  # a new connection's: it doubles while reads fill it, up to READ_BUFFER
CLOSE_DROP_MAX = 1 << 20  # a closing connection reads (and drops) this much from its client, then is aborted
MIN_READ = 4 * 1024  # less free room than this at the buffer's end: unparsed bytes move to its front first

# The connection's own state, apart from its streams'.
AWAIT_PREFACE, AWAIT_SETTINGS, READY, CLOSING = range(4)

# Frame types whose stream id must be 0, or must not be (RFC 9113 section 6); checked on the frame's header.
_ON_CONNECTION = frozenset((SETTINGS, PING, GOAWAY))
_ON_STREAM = frozenset((DATA, HEADERS, RST_STREAM, CONTINUATION))
_EXACT_LENGTH = {RST_STREAM: 4, PING: 8, WINDOW_UPDATE: 4}  # PRIORITY's is a stream error, checked later


class FrameReader(asyncio.BufferedProtocol):
    """The read side of a connection. Subclasses handle frames (`_handlers`), DATA (`_on_data`, `_data_frame_done`,
    `calls.feed`), stream errors (`_stream_error`) and connection errors (`_fail`)."""

    outbox: Outbox
    calls: GrpcCalls
    keepalive: Keepalive
    transport: asyncio.Transport | None

    def __init__(self, limits: H2Limits):
        self.limits = limits
        self.loop = asyncio.get_running_loop()
        self.peer = ""
        self._phase = AWAIT_PREFACE
        self._buf = bytearray(FIRST_READ_BUFFER)
        self._view = memoryview(self._buf)
        self._buf_size = FIRST_READ_BUFFER  # what the buffer is to be when it is next (re)allocated
        self._start = 0
        self._end = 0
        # The longest frame of each type we accept (DATA is streamed, unknown types are skipped). A header block
        # may be as long as the header list it encodes, and at least the protocol's default frame size.
        self._block_limit = block = max(MIN_MAX_FRAME, limits.max_header_list_size)
        self._frame_limits = (MAX_MAX_FRAME, block + 261, 64, 4, 6 * 64, 0, 8, block + 8, 4, block)
        self._direct: Stream | None = None  # the stream whose message the socket is writing into
        # the DATA frame being received (its payload is streamed, never buffered whole) or a frame being skipped
        self._data_left = 0
        self._pad_left = 0
        self._skip_left = 0
        self._data_stream: Stream | None = None
        self._data_flags = 0
        # a header block spread over HEADERS + CONTINUATION frames
        self._block: bytearray | None = None
        self._block_stream = 0
        self._block_flags = 0
        self._self_dependent = False
        self._recv_window = limits.initial_window_size  # what the client may still send on the connection
        self._recv_unacked = 0
        self._empty_budget = RateBudget(limits.max_empty_frames_per_s)
        self._dropped = 0  # bytes read and dropped since the connection began to close

    # ---- the subclass's part ----------------------------------------------------------------------------------------
    def _dispatch(self, ftype: int, flags: int, stream_id: int, payload: memoryview) -> None:
        raise NotImplementedError

    def _on_data(self, stream_id: int, flags: int, length: int, size: int) -> None:
        """A DATA frame begins: `length` counted by flow control, `size` of data (padding aside)."""
        raise NotImplementedError

    def _data_frame_done(self) -> None:
        raise NotImplementedError

    def _header_block(self, stream_id: int, flags: int, block: bytes, self_dependent: bool) -> None:
        """A complete header block (of HEADERS and CONTINUATION frames)."""
        raise NotImplementedError

    def _block_started(self) -> None:
        """A header block goes on in CONTINUATION frames."""
        raise NotImplementedError

    def _stream_error(self, exc: H2StreamError) -> None:
        raise NotImplementedError

    def _fail(self, code: int, reason: str) -> None:
        raise NotImplementedError

    # ---- asyncio's buffered protocol --------------------------------------------------------------------------------
    def get_buffer(self, sizehint: int) -> memoryview:
        if self._start == self._end:
            self._start = self._end = 0
            stream = self._data_stream
            if stream is not None and self._data_left >= DIRECT_MIN:
                view = self.calls.direct_view(stream, self._data_left)
                if view is not None:
                    self._direct = stream
                    return view
            if len(self._buf) < self._buf_size:
                self._set_buffer(bytearray(self._buf_size))
        elif len(self._buf) - self._end < MIN_READ:
            self._make_room()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self.keepalive.last_read = self.loop.time()
        try:
            stream = self._direct
            if stream is not None:
                self._direct = None
                self._data_left -= nbytes
                self.calls.direct_received(stream, nbytes)
                if not self._data_left and not self._pad_left:
                    self._data_frame_done()
                return
            self._end += nbytes
            if self._phase == CLOSING:  # what a client sends after our GOAWAY is dropped, up to a point
                self._start = self._end = 0
                self._dropped += nbytes
                if self._dropped > CLOSE_DROP_MAX and self.transport is not None:
                    self.transport.abort()
                return
            if self._end == len(self._buf) and self._buf_size < READ_BUFFER:
                self._buf_size = min(2 * len(self._buf), READ_BUFFER)  # the socket had more: read more at once
            self._process()
        except H2ConnectionError as exc:
            self._fail(exc.code, str(exc))
        except Exception:
            logger.exception("gRPC connection from %s failed", self.peer)
            self._fail(INTERNAL_ERROR, "internal error")

    # ---- the read buffer -------------------------------------------------------------------------------------------
    def _set_buffer(self, buffer: bytearray) -> None:
        self._view.release()
        self._buf, self._view = buffer, memoryview(buffer)

    def _make_room(self) -> None:
        """Move the unparsed bytes to the front; when they (an unfinished frame, within its type's limit) still fill
        most of the buffer, double it: it grows with the bytes received, never to a length a header declares."""
        pending = self._end - self._start
        if self._start:
            self._buf[:pending] = self._view[self._start : self._end]
            self._start, self._end = 0, pending
        if len(self._buf) - pending < max(MIN_READ, len(self._buf) // 2):
            buffer = bytearray(2 * len(self._buf))
            buffer[:pending] = self._view[:pending]
            self._set_buffer(buffer)
            self._buf_size = max(self._buf_size, len(buffer))

    def _release_read_buffer(self) -> None:
        if self._start == self._end and self._buf:
            self._start = self._end = 0
            self._set_buffer(bytearray())
            self._buf_size = FIRST_READ_BUFFER

    # ---- frames ------------------------------------------------------------------------------------------------------
    def _process(self) -> None:
        view = self._view
        while True:
            start, end = self._start, self._end
            if self._data_left:
                if start == end:
                    return
                take = min(end - start, self._data_left)
                if self._data_stream is not None:
                    self.calls.feed(self._data_stream, view[start : start + take])
                self._start = start + take
                self._data_left -= take
                if self._data_left:
                    return
                if not self._pad_left:
                    self._data_frame_done()
                continue
            if self._pad_left or self._skip_left:
                take = min(end - start, self._pad_left + self._skip_left)
                self._start = start + take
                if self._pad_left:
                    self._pad_left -= take
                    if self._pad_left:
                        return
                    self._data_frame_done()
                else:
                    self._skip_left -= take
                    if self._skip_left:
                        return
                continue
            if self._phase == AWAIT_PREFACE:
                if end - start < len(PREFACE):
                    if view[start:end] != PREFACE[: end - start]:
                        raise H2ConnectionError(PROTOCOL_ERROR, "not an HTTP/2 connection preface")
                    return
                if view[start : start + len(PREFACE)] != PREFACE:
                    raise H2ConnectionError(PROTOCOL_ERROR, "not an HTTP/2 connection preface")
                self._phase = AWAIT_SETTINGS
                self._start = start + len(PREFACE)
                continue
            if end - start < 9:
                return
            high, low, ftype, flags, stream_id = FRAME.unpack_from(view, start)
            length = (high << 8) | low
            stream_id &= 0x7FFFFFFF
            self._check_header(ftype, flags, stream_id, length)
            if ftype == DATA:
                if flags & PADDED and length and end - start < 10:  # its pad length byte has not arrived yet
                    return
                self._start = start + 9
                try:
                    self._data_frame(length, flags, stream_id)
                except H2StreamError as exc:
                    self._stream_error(exc)
                continue
            if ftype > CONTINUATION:  # unknown frame types are skipped as they arrive (RFC 9113 5.5)
                self._start = start + 9
                self._skip_left = length
                continue
            if end - start < 9 + length:
                if start + 9 + length > len(self._buf):
                    self._make_room()  # the frame fits once moved to the front (or after the buffer grows)
                return
            self._start = start + 9 + length
            try:
                self._dispatch(ftype, flags, stream_id, view[start + 9 : start + 9 + length])
            except H2StreamError as exc:
                self._stream_error(exc)
            if self._phase == CLOSING:
                return

    def _check_header(self, ftype: int, flags: int, stream_id: int, length: int) -> None:
        """What a frame's 9-byte header alone shows to be wrong (RFC 9113 4.2, 5.5, 6, 8.4)."""
        if length > self.limits.max_frame_size:
            raise H2ConnectionError(FRAME_SIZE_ERROR, f"frame of {length} bytes")
        if self._phase == AWAIT_SETTINGS:
            if ftype != SETTINGS or flags & ACK:
                raise H2ConnectionError(PROTOCOL_ERROR, "the connection preface must be followed by SETTINGS")
            self._phase = READY
        if self._block is not None and ftype != CONTINUATION:
            raise H2ConnectionError(PROTOCOL_ERROR, "a frame of another type inside a header block")
        if ftype > CONTINUATION:
            if not length:
                self._spend(self._empty_budget, "empty frames")
            return
        if ftype == PUSH_PROMISE:
            raise H2ConnectionError(PROTOCOL_ERROR, "PUSH_PROMISE from a client")
        if length > self._frame_limits[ftype] or _EXACT_LENGTH.get(ftype, length) != length:
            raise H2ConnectionError(FRAME_SIZE_ERROR, f"{length}-byte frame of type {ftype}")
        if ftype in _ON_CONNECTION:
            if stream_id:
                raise H2ConnectionError(PROTOCOL_ERROR, f"frame of type {ftype} on a stream")
        elif not stream_id and ftype != WINDOW_UPDATE:
            raise H2ConnectionError(PROTOCOL_ERROR, f"frame of type {ftype} on stream 0")

    def return_window(self, stream: Stream) -> None:
        """Give the client back what it sent on `stream`, half a window at a time, except the messages of a
        client-streaming call that its handler has not taken yet: a client that sends faster than the handler
        takes is held by flow control (the connection's window is returned as bytes arrive)."""
        returnable = stream.recv_unacked - stream.held
        if stream is self._data_stream:  # the rest of the DATA frame being read is not in yet
            returnable -= self._data_left + self._pad_left
        if returnable >= self.limits.initial_window_size // 2:
            self.outbox.control(window_update_frame(stream.id, returnable))
            stream.recv_window += returnable
            stream.recv_unacked -= returnable

    def _spend(self, budget: RateBudget, what: str) -> None:
        if not budget.spend(self.loop.time()):
            raise H2ConnectionError(ENHANCE_YOUR_CALM, f"too many {what} (more than {budget.rate:g} per second)")

    def _data_frame(self, length: int, flags: int, stream_id: int) -> None:
        self._data_stream = None
        pad = 0
        if flags & PADDED:
            if not length:
                raise H2ConnectionError(FRAME_SIZE_ERROR, "padded DATA frame without a pad length")
            pad = self._view[self._start]
            self._start += 1
            if pad >= length:
                raise H2ConnectionError(PROTOCOL_ERROR, "padding longer than the frame")
        size = length - pad - 1 if flags & PADDED else length
        self._data_left, self._pad_left, self._data_flags = size, pad, flags
        # connection flow control counts every DATA frame, whatever becomes of it
        self._recv_window -= length
        if self._recv_window < 0:
            raise H2ConnectionError(FLOW_CONTROL_ERROR, "DATA beyond the connection's flow-control window")
        self._recv_unacked += length
        if self._recv_unacked >= self.limits.initial_window_size // 2:
            self.outbox.control(window_update_frame(0, self._recv_unacked))
            self._recv_window += self._recv_unacked
            self._recv_unacked = 0
        if not size and not flags & END_STREAM:
            self._spend(self._empty_budget, "empty frames")
        self._on_data(stream_id, flags, length, size)

    def _on_headers(self, flags: int, stream_id: int, payload: memoryview) -> None:
        pos, end = 0, len(payload)
        if flags & PADDED:
            if not end:
                raise H2ConnectionError(FRAME_SIZE_ERROR, "padded HEADERS frame without a pad length")
            end -= payload[0]
            pos = 1
        self_dependent = False
        if flags & PRIORITY_FLAG:
            if end - pos >= 4:
                self_dependent = int.from_bytes(payload[pos : pos + 4], "big") & 0x7FFFFFFF == stream_id
            pos += 5
        if pos > end:
            raise H2ConnectionError(PROTOCOL_ERROR, "padding longer than the HEADERS frame")
        if flags & END_HEADERS:
            self._header_block(stream_id, flags, bytes(payload[pos:end]), self_dependent)
            return
        if pos == end:
            self._spend(self._empty_budget, "empty frames")
        self._block = bytearray(payload[pos:end])
        self._block_stream, self._block_flags, self._self_dependent = stream_id, flags, self_dependent
        self._block_started()

    def _on_continuation(self, flags: int, stream_id: int, payload: memoryview) -> None:
        block = self._block
        if block is None or stream_id != self._block_stream:
            raise H2ConnectionError(PROTOCOL_ERROR, "unexpected CONTINUATION frame")
        if not payload and not flags & END_HEADERS:
            self._spend(self._empty_budget, "empty frames")
        block += payload
        if len(block) > self._block_limit:
            raise H2ConnectionError(ENHANCE_YOUR_CALM, f"header block larger than {self._block_limit} bytes")
        if flags & END_HEADERS:
            self._block = None
            self._header_block(stream_id, self._block_flags, bytes(block), self._self_dependent)
