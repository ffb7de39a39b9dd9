"""gRPC's HTTP/2 transport on asyncio, in this process, without grpcio's server.

grpc.aio runs every call through its Cython layer on the event loop's thread (about 0.6 ms of CPU per small
ModelInfer here, more with a large tensor: the message is copied three times inside grpc on the way in). This is
the subset of HTTP/2 (RFC 9113) a gRPC server needs, written for that one job and bounded in everything a client
can make it hold (`H2Limits`):

* frames are parsed from one per-connection buffer that grows only as bytes arrive; each frame type has a length
  limit checked on its 9-byte header, DATA is never buffered whole; header blocks are decoded by the `hpack`
  package and measured against SETTINGS_MAX_HEADER_LIST_SIZE;
* each stream follows an explicit state table (`_h2_stream`); the connection's own state (preface, settings,
  GOAWAY) is kept here;
* flow control both ways, PING (with grpcio's ping policy), SETTINGS, RST_STREAM (cancels the call), GOAWAY on
  stop, on errors and past the rate limits (RST_STREAM, PING, SETTINGS, empty frames);
* gRPC on top (`_h2_call`): length-prefixed messages, gzip/deflate, `grpc-timeout`, metadata, status in trailers;
  frames out and the release of response buffers (`_h2_send`).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Callable

import grpc

from pytriton.frontend.grpc._h2_call import CallHead, Context, GrpcCalls, Method, RpcAbort, parse_request
from pytriton.frontend.grpc._h2_frames import (
    ACK,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    ENHANCE_YOUR_CALM,
    ERROR_NAMES,
    FLOW_CONTROL_ERROR,
    FRAME,
    FRAME_SIZE_ERROR,
    GOAWAY,
    HEADERS,
    INTERNAL_ERROR,
    MAX_MAX_FRAME,
    MAX_WINDOW,
    MIN_MAX_FRAME,
    NO_ERROR,
    PADDED,
    PING,
    PREFACE,
    PRIORITY,
    PRIORITY_FLAG,
    PROTOCOL_ERROR,
    PUSH_PROMISE,
    REFUSED_STREAM,
    RST_STREAM,
    S_ENABLE_PUSH,
    S_INITIAL_WINDOW_SIZE,
    S_MAX_CONCURRENT_STREAMS,
    S_MAX_FRAME_SIZE,
    S_MAX_HEADER_LIST_SIZE,
    SETTINGS,
    WINDOW_UPDATE,
    H2ConnectionError,
    H2StreamError,
    HeaderBlockDecoder,
    frame_header,
    goaway_frame,
    rst_stream_frame,
    settings_frame,
    window_update_frame,
)
from pytriton.frontend.grpc._h2_limits import H2Limits, PingPolicy, RateBudget
from pytriton.frontend.grpc._h2_send import Outbox
from pytriton.frontend.grpc._h2_stream import (
    CLOSED,
    CLOSED_RESET_BY_US,
    HALF_CLOSED_LOCAL,
    IDLE,
    RECV_DATA,
    RECV_END_STREAM,
    RECV_HEADERS,
    RECV_PRIORITY,
    RECV_RST_STREAM,
    RECV_WINDOW_UPDATE,
    SEND_RST_STREAM,
    ClosedStreams,
    Stream,
    transition,
    window_error,
)

__all__ = ["Context", "GrpcConnection", "H2Limits", "Method", "RpcAbort"]

logger = logging.getLogger("pytriton.frontend")

READ_BUFFER = 64 * 1024  # per connection while it is in use; large messages bypass it
MIN_READ = 16 * 1024  # less free room than this at the buffer's end: unparsed bytes move to its front first
CLOSE_LINGER_S = 5.0  # a connection we close that does not take its last bytes is aborted after this
_U32 = struct.Struct(">L")

# The connection's own state.
AWAIT_PREFACE, AWAIT_SETTINGS, READY, CLOSING = range(4)


class GrpcConnection(asyncio.BufferedProtocol):
    """One client connection: HTTP/2 frames in, RPCs dispatched to `methods`, responses out."""

    def __init__(self, methods: dict[bytes, Method], connections: set[GrpcConnection] | None = None,
                 limits: H2Limits | None = None):  # fmt: skip
        self.limits = limits = limits or H2Limits()
        self.connections = connections
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self._phase = AWAIT_PREFACE
        self._buf = bytearray(READ_BUFFER)
        self._view = memoryview(self._buf)
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
        self._decoder = HeaderBlockDecoder(2 * limits.max_header_list_size)  # grpc: a soft and a 2x hard limit
        self._last_block: bytes | None = None  # the last header block of table references only, and its request
        self._last_head: CallHead | None = None
        self.streams: dict[int, Stream] = {}
        self.closed = ClosedStreams()
        self.last_stream_id = 0
        self._recv_window = limits.initial_window_size  # what the client may still send on the connection
        self._recv_unacked = 0
        self._pings = PingPolicy(limits.min_ping_interval_s, limits.max_ping_strikes)
        self._resets = RateBudget(limits.max_resets_per_s)
        self._ping_budget = RateBudget(limits.max_pings_per_s)
        self._settings_budget = RateBudget(limits.max_settings_per_s)
        self._empty_budget = RateBudget(limits.max_empty_frames_per_s)
        self.outbox = Outbox(self._local_end, self._pings, limits.max_pending_control_frames)
        self.calls = GrpcCalls(self, methods, limits.max_message_bytes)
        self.going_away = False
        self.idle: asyncio.Event = asyncio.Event()
        self.idle.set()
        self._idle_since = self.loop.time()
        self._header_deadline: float | None = None  # preface + first request, or a header block, due by then
        self._tick: asyncio.TimerHandle | None = None
        self._linger: asyncio.TimerHandle | None = None
        self._handlers: dict[int, Callable[[int, int, memoryview], None]] = {
            HEADERS: self._on_headers, PRIORITY: self._on_priority, RST_STREAM: self._on_rst_stream,
            SETTINGS: self._on_settings, PING: self._on_ping,
            GOAWAY: self._on_goaway, WINDOW_UPDATE: self._on_window_update, CONTINUATION: self._on_continuation,
        }  # fmt: skip

    # ---- asyncio protocol ----------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = self.outbox.transport = transport  # type: ignore[assignment]
        peername = transport.get_extra_info("peername")
        if isinstance(peername, tuple) and len(peername) >= 2:
            host, port = peername[0], peername[1]
            self.peer = f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
        else:
            self.peer = "unix:"
        if self.connections is not None:
            self.connections.add(self)
        # pause_writing/resume_writing then tell when the transport holds data and when it has sent it all.
        self.transport.set_write_buffer_limits(high=0)  # type: ignore[union-attr]
        limits = self.limits
        settings = settings_frame({
            S_MAX_CONCURRENT_STREAMS: limits.max_concurrent_streams, S_INITIAL_WINDOW_SIZE: limits.initial_window_size,
            S_MAX_FRAME_SIZE: limits.max_frame_size, S_MAX_HEADER_LIST_SIZE: limits.max_header_list_size,
        })  # fmt: skip
        self.transport.write(settings + window_update_frame(0, limits.initial_window_size - 65535))  # type: ignore
        self._header_deadline = self.loop.time() + limits.header_timeout_s
        self._arm(self._header_deadline)

    def connection_lost(self, exc: Exception | None) -> None:
        self._phase = CLOSING
        self.transport = self.outbox.transport = None
        if self.connections is not None:
            self.connections.discard(self)
        for stream in list(self.streams.values()):
            self._forget(stream, cancel=True)
        self.outbox.lost()
        for timer in (self._tick, self._linger):
            if timer is not None:
                timer.cancel()
        self._tick = self._linger = None
        self._release_buffers()
        self.idle.set()

    def pause_writing(self) -> None:
        """The transport holds unsent data (the write buffer limits are 0: this comes with the first byte)."""
        self.outbox.pause()

    def resume_writing(self) -> None:
        """The transport's buffer is empty: the buffers it held go back to their owners."""
        self.outbox.resume()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._start == self._end:
            self._start = self._end = 0
            stream = self._data_stream
            if stream is not None and self._data_left >= READ_BUFFER:
                view = self.calls.direct_view(stream, self._data_left)
                if view is not None:
                    self._direct = stream
                    return view
            if not self._buf:
                self._set_buffer(bytearray(READ_BUFFER))
        elif len(self._buf) - self._end < MIN_READ:
            self._make_room()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
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
            if self._phase != CLOSING:
                self._process()
        except H2ConnectionError as exc:
            self._fail(exc.code, str(exc))
        except Exception:  # noqa: BLE001 - a bug here must not take the event loop down
            logger.exception("gRPC connection from %s failed", self.peer)
            self._fail(INTERNAL_ERROR, "internal error")

    # ---- the read buffer -------------------------------------------------------------------------------------------
    def _set_buffer(self, buffer: bytearray) -> None:
        self._view.release()
        self._buf, self._view = buffer, memoryview(buffer)

    def _make_room(self) -> None:
        """Move the unparsed bytes to the front; when they fill the buffer (a frame longer than it, within its
        type's limit), double it: the buffer grows with the bytes received, not with a declared length."""
        pending = self._end - self._start
        if self._start:
            self._buf[:pending] = self._view[self._start : self._end]
            self._start, self._end = 0, pending
        if len(self._buf) - pending < MIN_READ:
            buffer = bytearray(max(2 * len(self._buf), READ_BUFFER))
            buffer[:pending] = self._view[:pending]
            self._set_buffer(buffer)

    def _release_buffers(self) -> None:
        """An idle connection keeps no large buffer: the read buffer (if empty) and the spare message buffer go."""
        if self._start == self._end and self._buf:
            self._start = self._end = 0
            self._set_buffer(bytearray())
        self.calls.spare = None
        self.closed.clear()

    # ---- frames in ----------------------------------------------------------------------------------------------------
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
            if length > self.limits.max_frame_size:
                raise H2ConnectionError(FRAME_SIZE_ERROR, f"frame of {length} bytes")
            if self._phase == AWAIT_SETTINGS:
                if ftype != SETTINGS or flags & ACK:
                    raise H2ConnectionError(PROTOCOL_ERROR, "the connection preface must be followed by SETTINGS")
                self._phase = READY
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
                if self._block is not None:
                    raise H2ConnectionError(PROTOCOL_ERROR, "a frame of another type inside a header block")
                if not length:
                    self._spend(self._empty_budget, "empty frames")
                self._start = start + 9
                self._skip_left = length
                continue
            if ftype == PUSH_PROMISE:
                raise H2ConnectionError(PROTOCOL_ERROR, "PUSH_PROMISE from a client")
            if length > self._frame_limits[ftype]:
                raise H2ConnectionError(FRAME_SIZE_ERROR, f"{length}-byte frame of type {ftype}: above its limit")
            if end - start < 9 + length:
                if start + 9 + length > len(self._buf):
                    self._make_room()  # the frame fits once moved to the front (or after the buffer grows)
                return
            self._start = start + 9 + length
            if self._block is not None and ftype != CONTINUATION:
                raise H2ConnectionError(PROTOCOL_ERROR, "a frame of another type inside a header block")
            try:
                self._handlers[ftype](flags, stream_id, view[start + 9 : start + 9 + length])
            except H2StreamError as exc:
                self._stream_error(exc)
            if self._phase == CLOSING:
                return

    def _spend(self, budget: RateBudget, what: str) -> None:
        if not budget.spend(self.loop.time()):
            raise H2ConnectionError(ENHANCE_YOUR_CALM, f"too many {what} (more than {budget.rate:g} per second)")

    def _data_frame(self, length: int, flags: int, stream_id: int) -> None:
        if self._block is not None or stream_id == 0:
            raise H2ConnectionError(PROTOCOL_ERROR, "unexpected DATA frame")
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
        stream = self.streams.get(stream_id)
        if stream is None:
            transition(stream_id, self.closed.state(stream_id, self.last_stream_id), RECV_DATA)
            return  # ignored (a late frame on a stream we reset)
        stream.state = transition(stream_id, stream.state, RECV_DATA)  # type: ignore[assignment]
        stream.recv_window -= length
        if stream.recv_window < 0:
            raise H2StreamError(stream_id, FLOW_CONTROL_ERROR, "DATA beyond the stream's flow-control window")
        stream.recv_unacked += length
        if stream.recv_unacked >= self.limits.initial_window_size // 2 and not flags & END_STREAM:
            self.outbox.control(window_update_frame(stream_id, stream.recv_unacked))
            stream.recv_window += stream.recv_unacked
            stream.recv_unacked = 0
        if stream.content_length is not None:
            stream.received += size
            if stream.received > stream.content_length:
                raise H2StreamError(stream_id, PROTOCOL_ERROR, "more DATA than its content-length")
        self._data_stream = stream
        if not size and not pad:
            self._data_frame_done()

    def _data_frame_done(self) -> None:
        stream, self._data_stream = self._data_stream, None
        if stream is not None and self._data_flags & END_STREAM:
            try:
                self._end_stream(stream)
            except H2StreamError as exc:
                self._stream_error(exc)

    def _end_stream(self, stream: Stream) -> None:
        stream.state = transition(stream.id, stream.state, RECV_END_STREAM)  # type: ignore[assignment]
        if stream.content_length is not None and stream.received != stream.content_length:
            raise H2StreamError(stream.id, PROTOCOL_ERROR, "DATA shorter than its content-length")
        if stream.state == CLOSED:
            self._forget(stream, cancel=False)
        else:
            self.calls.end(stream)

    def _on_headers(self, flags: int, stream_id: int, payload: memoryview) -> None:
        if stream_id == 0:
            raise H2ConnectionError(PROTOCOL_ERROR, "HEADERS on stream 0")
        pos, end = 0, len(payload)
        if flags & PADDED:
            if not end:
                raise H2ConnectionError(FRAME_SIZE_ERROR, "padded HEADERS frame without a pad length")
            end -= payload[0]
            pos = 1
        if flags & PRIORITY_FLAG:
            if end - pos >= 4:
                self._self_dependent = _U32.unpack_from(payload, pos)[0] & 0x7FFFFFFF == stream_id
            pos += 5
        if pos > end:
            raise H2ConnectionError(PROTOCOL_ERROR, "padding longer than the HEADERS frame")
        if pos == end and not flags & END_HEADERS:
            self._spend(self._empty_budget, "empty frames")
        if flags & END_HEADERS:
            self._header_block(stream_id, flags, bytes(payload[pos:end]))
            return
        self._block = bytearray(payload[pos:end])
        self._block_stream, self._block_flags = stream_id, flags
        self._header_deadline = self.loop.time() + self.limits.header_timeout_s
        self._arm(self._header_deadline)

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
            self._header_deadline = None
            self._header_block(stream_id, self._block_flags, bytes(block))

    def _header_block(self, stream_id: int, flags: int, block: bytes) -> None:
        """A complete header block: a new request, or the trailers of one."""
        headers: list[tuple[bytes, bytes]] = []
        head = None
        size = 0
        if block == self._last_block:  # the same references to the same table entries: the same request
            head = self._last_head
        else:
            headers, size = self._decoder.decode(block)
            if not self._decoder.table_unchanged:
                self._last_block = None
        self_dependent, self._self_dependent = self._self_dependent, False
        stream = self.streams.get(stream_id)
        if stream is not None:  # trailers: no pseudo-headers, and the request's end
            stream.state = transition(stream_id, stream.state, RECV_HEADERS)  # type: ignore[assignment]
            if not flags & END_STREAM or head is not None or any(name[:1] == b":" for name, _ in headers):
                raise H2StreamError(stream_id, PROTOCOL_ERROR, "trailers without END_STREAM or with pseudo-headers")
            self._end_stream(stream)
            return
        if not stream_id & 1:
            raise H2ConnectionError(PROTOCOL_ERROR, f"HEADERS on stream {stream_id}, an id only servers may use")
        state = self.closed.state(stream_id, self.last_stream_id)
        if state != IDLE:
            transition(stream_id, state, RECV_HEADERS)
            return  # ignored (a late frame on a stream we reset)
        stream = Stream(stream_id, transition(stream_id, IDLE, RECV_HEADERS), self.outbox.initial_window,
                        self.limits.initial_window_size)  # type: ignore[arg-type]
        self.last_stream_id = stream_id
        self._header_deadline = None
        if self_dependent:
            raise H2StreamError(stream_id, PROTOCOL_ERROR, "a stream cannot depend on itself")
        if self.going_away or len(self.streams) >= self.limits.max_concurrent_streams:
            self._stream_error(H2StreamError(stream_id, REFUSED_STREAM, "over the concurrent stream limit"))
            return
        self.streams[stream_id] = stream
        self.idle.clear()
        if flags & END_STREAM:
            stream.state = transition(stream_id, stream.state, RECV_END_STREAM)  # type: ignore[assignment]
        if size > self.limits.max_header_list_size:
            limit = self.limits.max_header_list_size
            self.outbox.finish(stream, grpc.StatusCode.RESOURCE_EXHAUSTED,
                               f"header list of {size} bytes is larger than the limit of {limit} bytes")
            return
        if head is None:
            head = parse_request(stream_id, headers)
            if self._decoder.table_unchanged:
                self._last_block, self._last_head = block, head
        self.calls.start(stream, head)
        if flags & END_STREAM and stream.id in self.streams:
            if head.content_length:
                raise H2StreamError(stream_id, PROTOCOL_ERROR, "DATA shorter than its content-length")
            self.calls.end(stream)

    def _on_priority(self, flags: int, stream_id: int, payload: memoryview) -> None:
        if stream_id == 0:
            raise H2ConnectionError(PROTOCOL_ERROR, "PRIORITY on stream 0")
        stream = self.streams.get(stream_id)
        state = stream.state if stream is not None else self.closed.state(stream_id, self.last_stream_id)
        if len(payload) != 5:
            if state == IDLE:
                raise H2ConnectionError(FRAME_SIZE_ERROR, "PRIORITY frame of a length other than 5")
            raise H2StreamError(stream_id, FRAME_SIZE_ERROR, "PRIORITY frame of a length other than 5")
        if _U32.unpack_from(payload)[0] & 0x7FFFFFFF == stream_id:
            if state == IDLE:  # a RST_STREAM must not be sent on an idle stream
                raise H2ConnectionError(PROTOCOL_ERROR, f"stream {stream_id} cannot depend on itself")
            raise H2StreamError(stream_id, PROTOCOL_ERROR, "a stream cannot depend on itself")
        transition(stream_id, state, RECV_PRIORITY)  # priorities are accepted and not used

    def _on_rst_stream(self, flags: int, stream_id: int, payload: memoryview) -> None:
        if len(payload) != 4:
            raise H2ConnectionError(FRAME_SIZE_ERROR, "RST_STREAM frame of a length other than 4")
        if stream_id == 0:
            raise H2ConnectionError(PROTOCOL_ERROR, "RST_STREAM on stream 0")
        self._spend(self._resets, "RST_STREAM frames")
        stream = self.streams.get(stream_id)
        if stream is None:
            transition(stream_id, self.closed.state(stream_id, self.last_stream_id), RECV_RST_STREAM)
            return
        stream.state = transition(stream_id, stream.state, RECV_RST_STREAM)  # type: ignore[assignment]
        self._forget(stream, cancel=True)

    def _on_settings(self, flags: int, stream_id: int, payload: memoryview) -> None:
        if stream_id:
            raise H2ConnectionError(PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & ACK:
            if payload:
                raise H2ConnectionError(FRAME_SIZE_ERROR, "SETTINGS acknowledgement with a payload")
            return
        if len(payload) % 6:
            raise H2ConnectionError(FRAME_SIZE_ERROR, "SETTINGS frame of a length not a multiple of 6")
        self._spend(self._settings_budget, "SETTINGS frames")
        outbox = self.outbox
        for pos in range(0, len(payload), 6):
            key, value = struct.unpack_from(">HL", payload, pos)
            if key == S_INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise H2ConnectionError(FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1")
                delta = value - outbox.initial_window
                outbox.initial_window = value
                for stream in self.streams.values():
                    stream.send_window += delta
                    if stream.send_window > MAX_WINDOW:
                        raise H2ConnectionError(FLOW_CONTROL_ERROR, "a stream's window would exceed 2^31-1")
            elif key == S_MAX_FRAME_SIZE:
                if not MIN_MAX_FRAME <= value <= MAX_MAX_FRAME:
                    raise H2ConnectionError(PROTOCOL_ERROR, f"SETTINGS_MAX_FRAME_SIZE {value}")
                outbox.max_frame = value
            elif key == S_ENABLE_PUSH and value > 1:
                raise H2ConnectionError(PROTOCOL_ERROR, f"SETTINGS_ENABLE_PUSH {value}")
            # the others (header table size, concurrent streams, header list size) do not change what we send
        outbox.control(frame_header(0, SETTINGS, ACK, 0))
        outbox.flush_blocked()

    def _on_ping(self, flags: int, stream_id: int, payload: memoryview) -> None:
        if len(payload) != 8:
            raise H2ConnectionError(FRAME_SIZE_ERROR, "PING frame of a length other than 8")
        if stream_id:
            raise H2ConnectionError(PROTOCOL_ERROR, "PING on a stream")
        if flags & ACK:
            return
        self._spend(self._ping_budget, "PING frames")
        if self._pings.too_many(self.loop.time()):
            raise H2ConnectionError(ENHANCE_YOUR_CALM, "too_many_pings")
        self.outbox.control(frame_header(8, PING, ACK, 0) + bytes(payload))

    def _on_goaway(self, flags: int, stream_id: int, payload: memoryview) -> None:
        if stream_id:
            raise H2ConnectionError(PROTOCOL_ERROR, "GOAWAY on a stream")
        if len(payload) < 8:
            raise H2ConnectionError(FRAME_SIZE_ERROR, "GOAWAY frame shorter than 8 bytes")
        self.going_away = True  # the client opens no more streams; those in progress go on

    def _on_window_update(self, flags: int, stream_id: int, payload: memoryview) -> None:
        if len(payload) != 4:
            raise H2ConnectionError(FRAME_SIZE_ERROR, "WINDOW_UPDATE frame of a length other than 4")
        increment = _U32.unpack_from(payload)[0] & 0x7FFFFFFF
        outbox = self.outbox
        if stream_id == 0:
            if not increment:
                raise H2ConnectionError(PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
            outbox.window += increment
            if outbox.window > MAX_WINDOW:
                raise window_error(0)
            outbox.flush_blocked()
            return
        stream = self.streams.get(stream_id)
        if stream is None:
            transition(stream_id, self.closed.state(stream_id, self.last_stream_id), RECV_WINDOW_UPDATE)
            return
        if not increment:
            raise H2StreamError(stream_id, PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
        stream.state = transition(stream_id, stream.state, RECV_WINDOW_UPDATE)  # type: ignore[assignment]
        stream.send_window += increment
        if stream.send_window > MAX_WINDOW:
            raise window_error(stream_id)
        if stream.pending or stream.trailers is not None:
            outbox.flush(stream)

    # ---- streams ----------------------------------------------------------------------------------------------
    def _stream_error(self, exc: H2StreamError) -> None:
        """RST_STREAM with the error's code; the stream (if open) is closed and its call cancelled."""
        logger.debug("gRPC connection from %s: %s (%s)", self.peer, exc, ERROR_NAMES[exc.code])
        self.outbox.control(rst_stream_frame(exc.stream_id, exc.code))
        stream = self.streams.get(exc.stream_id)
        if stream is not None:
            stream.state = transition(exc.stream_id, stream.state, SEND_RST_STREAM)  # type: ignore[assignment]
            self._forget(stream, cancel=True)
        else:
            self.closed.add(exc.stream_id, CLOSED_RESET_BY_US)
        self._spend(self._resets, "RST_STREAM frames")

    def _local_end(self, stream: Stream) -> None:
        """Our END_STREAM is out. A client still sending gets RST_STREAM NO_ERROR: we need no more of it."""
        if stream.state == HALF_CLOSED_LOCAL:
            self.outbox.control(rst_stream_frame(stream.id, NO_ERROR))
            stream.state = transition(stream.id, stream.state, SEND_RST_STREAM)  # type: ignore[assignment]
            self._forget(stream, cancel=True)
        elif stream.state == CLOSED:
            self._forget(stream, cancel=False)

    def _forget(self, stream: Stream, cancel: bool) -> None:
        if self.streams.pop(stream.id, None) is None:
            return
        self.closed.add(stream.id, stream.state if stream.state >= CLOSED else CLOSED_RESET_BY_US)
        if self._data_stream is stream:
            self._data_stream = None
        if stream.timer is not None:
            stream.timer.cancel()
            stream.timer = None
        if cancel and stream.task is not None and not stream.task.done():
            stream.task.cancel()
        if stream.queue is not None:
            stream.queue.put_nowait(None)
        if stream.drained is not None and not stream.drained.done():
            stream.drained.set_result(None)
        self.outbox.drop(stream)
        stream.body = None
        stream.messages.clear()
        if not self.streams:
            self._idle_since = now = self.loop.time()
            self.idle.set()
            self._arm(now + self.limits.buffer_release_s)

    # ---- timers: header and idle timeouts, idle buffers ----------------------------------------------------------------
    def _arm(self, when: float) -> None:
        tick = self._tick
        if tick is not None:
            if tick.when() <= when:
                return
            tick.cancel()
        self._tick = self.loop.call_at(when, self._on_tick)

    def _on_tick(self) -> None:
        self._tick = None
        if self._phase == CLOSING:
            return
        now = self.loop.time()
        limits = self.limits
        due = []
        if self._header_deadline is not None:
            if now >= self._header_deadline:
                what = "a header block" if self._block is not None else "the preface and a first request"
                code = PROTOCOL_ERROR if self._phase != READY or self._block is not None else NO_ERROR
                self._fail(code, f"{what} did not arrive within {limits.header_timeout_s:g} s")
                return
            due.append(self._header_deadline)
        holding = bool(self._buf) or self.calls.spare is not None
        if not self.streams:
            idle_for = now - self._idle_since
            if limits.idle_timeout_s is not None:
                if idle_for >= limits.idle_timeout_s:
                    self.goaway(NO_ERROR, f"idle for {limits.idle_timeout_s:g} s")
                    self.close()
                    return
                due.append(self._idle_since + limits.idle_timeout_s)
            if holding:
                if idle_for >= limits.buffer_release_s:
                    self._release_buffers()
                else:
                    due.append(self._idle_since + limits.buffer_release_s)
        elif holding:
            due.append(now + limits.buffer_release_s)  # busy: look again later
        if due:
            self._arm(min(due))

    # ---- the connection's end ---------------------------------------------------------------------------------------
    def _fail(self, code: int, reason: str) -> None:
        """A connection error: GOAWAY with its code, every call cancelled, the connection closed."""
        if self._phase == CLOSING or self.transport is None:
            return
        logger.debug("closing the gRPC connection from %s: %s (%s)", self.peer, reason, ERROR_NAMES[code])
        self.transport.write(goaway_frame(self.last_stream_id, code, reason))
        self._phase = CLOSING
        for stream in list(self.streams.values()):
            self._forget(stream, cancel=True)
        self.close()

    def goaway(self, code: int = NO_ERROR, reason: str = "") -> None:
        """Tell the client to open no new streams here (server stop); calls in progress go on."""
        self.going_away = True
        if self.transport is not None:
            self.transport.write(goaway_frame(self.last_stream_id, code, reason))

    def close(self) -> None:
        """Close the connection; one whose client does not take its last bytes is aborted after a while."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.close()
        if transport.get_write_buffer_size():
            self._linger = self.loop.call_later(CLOSE_LINGER_S, transport.abort)

