"""gRPC's HTTP/2 transport on asyncio, in this process, without grpcio's server.

grpc.aio runs every call through its Cython layer on the event loop's thread (about 0.6 ms of CPU per small
ModelInfer here, more with a large tensor: the message is copied three times inside grpc on the way in). This is
the subset of HTTP/2 (RFC 9113) a gRPC server needs, written for that one job and bounded in everything a client
can make it hold or do (`H2Limits`, docs/security.md). The connection is put together from:

* `_h2_read.FrameReader` (its base class): bytes in, frames out, with a read buffer that grows only as bytes
  arrive and each frame's header checked before its payload is buffered;
* `_h2_stream`: each stream's state table (RFC 9113 5.1); the connection's own state (preface, settings, GOAWAY)
  is kept apart, here and in the reader;
* `_h2_send.Outbox`: frames out within the client's windows, and the release of response buffers (`on_sent`);
* `_h2_head`: a request's header block checked and read; `_h2_call.GrpcCalls`: gRPC on a stream (messages,
  `grpc-timeout`, metadata, status in trailers; `_h2_message`:
  gzip/deflate); `_h2_method`: a method's entry (`Method`, whose `begin` answers a unary call from a callback
  instead of a task) and the handler's `Context`; `_h2_keepalive`: the server's keepalive PINGs;
* `_h2_frames`, `_h2_limits`: framing and HPACK pieces; limits, rate budgets and grpcio's ping policy.

This module handles the frames (streams opening and closing, flow control, SETTINGS, PING, GOAWAY, RST_STREAM that
cancels the call), rate limits, the header and idle timeouts, and closing.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import grpc

from pytriton.config.h2 import H2Limits, PingPolicy, RateBudget
from pytriton.frontend._socket_write import DirectWriteTransport
from pytriton.frontend.h2.call import GrpcCalls
from pytriton.frontend.h2.frames import (
    ACK,
    CONTINUATION,
    END_STREAM,
    ENHANCE_YOUR_CALM,
    ERROR_NAMES,
    FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR,
    GOAWAY,
    HEADERS,
    MAX_MAX_FRAME,
    MAX_WINDOW,
    MIN_MAX_FRAME,
    NO_ERROR,
    PING,
    PRIORITY,
    PROTOCOL_ERROR,
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
from pytriton.frontend.h2.head import CallHead, parse_request
from pytriton.frontend.h2.keepalive import Keepalive
from pytriton.frontend.h2.message import RpcAbort
from pytriton.frontend.h2.method import Context, Method
from pytriton.frontend.h2.read import CLOSING, READ_BUFFER, READY, FrameReader
from pytriton.frontend.h2.send import Outbox
from pytriton.frontend.h2.stream import (
    CLOSED,
    CLOSED_RESET_BY_US,
    HALF_CLOSED_LOCAL,
    IDLE,
    OPEN,
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

__all__ = ["READ_BUFFER", "Context", "GrpcConnection", "H2Limits", "Method", "RpcAbort"]

if TYPE_CHECKING:
    from pytriton.core.received import ReceivedBuffers

logger = logging.getLogger("pytriton.frontend")

CLOSE_LINGER_S = 5.0  # a connection we close that does not take its last bytes is aborted after this
_U32 = struct.Struct(">L")


class GrpcConnection(FrameReader):
    """One client connection: HTTP/2 frames in, RPCs dispatched to `methods`, responses out."""

    def __init__(self, methods: dict[bytes, Method], connections: set[GrpcConnection] | None = None,
                 limits: H2Limits | None = None, received: ReceivedBuffers | None = None):  # fmt: skip
        limits = limits or H2Limits()
        super().__init__(limits)
        self.connections = connections
        self.transport: asyncio.Transport | None = None
        self.writer: DirectWriteTransport | None = None
        self._decoder = HeaderBlockDecoder(2 * limits.max_header_list_size)  # grpc: a soft and a 2x hard limit
        self._last_block: bytes | None = None  # the last header block of table references only, and its request
        self._last_head: CallHead | None = None
        self.streams: dict[int, Stream] = {}
        self.closed = ClosedStreams()
        self.last_stream_id = 0
        self._pings = PingPolicy(limits.min_ping_interval_s, limits.max_ping_strikes,
                                 limits.keepalive_permit_without_calls)
        self._resets = RateBudget(limits.max_resets_per_s)
        self._ping_budget = RateBudget(limits.max_pings_per_s)
        self._settings_budget = RateBudget(limits.max_settings_per_s)
        self.outbox = Outbox(self._local_end, self._pings, limits.max_pending_control_frames)
        self.calls = GrpcCalls(self, methods, limits.max_message_bytes,
                               min(limits.max_message_bytes, limits.max_decompressed_bytes), limits.infer_gzip_level,
                               received)
        self.keepalive = Keepalive(self, limits, self._pings)
        self.going_away = False
        self.idle: asyncio.Event = asyncio.Event()
        self.idle.set()
        self._idle_since = self.loop.time()
        self._header_deadline: float | None = None  # preface + first request, or a header block, due by then
        self._tick: asyncio.TimerHandle | None = None
        self._linger: asyncio.TimerHandle | None = None
        self._handlers: dict[int, Callable[[int, int, memoryview], None]] = {
            HEADERS: self._on_headers, PRIORITY: self._on_priority, RST_STREAM: self._on_rst_stream,
            SETTINGS: self._on_settings, PING: self._on_ping, GOAWAY: self._on_goaway,
            WINDOW_UPDATE: self._on_window_update, CONTINUATION: self._on_continuation,
        }  # fmt: skip

    # ---- asyncio protocol ----------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Large buffers go out uncopied; small writes of one loop turn (a batch's answers, acknowledgements) in one send.
        self.writer = DirectWriteTransport(cast(asyncio.Transport, transport), coalesce=True)
        self.transport = self.outbox.transport = self.writer
        peername = transport.get_extra_info("peername")
        if isinstance(peername, tuple) and len(peername) >= 2:
            host, port = peername[0], peername[1]
            self.peer = f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
        else:
            self.peer = "unix:"
        if self.connections is not None:
            self.connections.add(self)
        # pause_writing/resume_writing then tell when the transport holds data and when it has sent it all.
        self.transport.set_write_buffer_limits(high=0)
        limits = self.limits
        settings = settings_frame({
            S_MAX_CONCURRENT_STREAMS: limits.max_concurrent_streams, S_INITIAL_WINDOW_SIZE: limits.initial_window_size,
            S_MAX_FRAME_SIZE: limits.max_frame_size, S_MAX_HEADER_LIST_SIZE: limits.max_header_list_size,
        })  # fmt: skip
        self.transport.write(settings + window_update_frame(0, limits.initial_window_size - 65535))
        self._header_deadline = self.loop.time() + limits.header_timeout_s
        self._arm(self._header_deadline)
        self.keepalive.start()

    def connection_lost(self, exc: Exception | None) -> None:
        self._phase = CLOSING
        self.transport = self.outbox.transport = None
        if self.writer is not None:
            self.writer.lost()
        if self.connections is not None:
            self.connections.discard(self)
        for stream in list(self.streams.values()):
            self._forget(stream, cancel=True)
        self.outbox.lost()
        self.keepalive.stop()
        for timer in (self._tick, self._linger):
            if timer is not None:
                timer.cancel()
        self._tick = self._linger = None
        self._release_buffers()
        self.idle.set()

    def pause_writing(self) -> None:
        """The transport holds unsent data (the write buffer limits are 0: this comes with the first byte)."""
        if self.writer is None or self.writer.paused():
            self.outbox.pause()

    def resume_writing(self) -> None:
        """The transport's buffer is empty (and the writer's queue): the buffers it held go back to their owners."""
        if self.writer is None or self.writer.resumed():
            self.outbox.resume()

    # ---- frames in (the reader hands them over) ---------------------------------------------------------------------
    def _dispatch(self, ftype: int, flags: int, stream_id: int, payload: memoryview) -> None:
        self._handlers[ftype](flags, stream_id, payload)

    def _on_data(self, stream_id: int, flags: int, length: int, size: int) -> None:
        stream = self.streams.get(stream_id)
        if stream is None:
            transition(stream_id, self.closed.state(stream_id, self.last_stream_id), RECV_DATA)
            return  # ignored (a late frame on a stream we reset)
        stream.state = transition(stream_id, stream.state, RECV_DATA)
        stream.recv_window -= length
        if stream.recv_window < 0:
            raise H2StreamError(stream_id, FLOW_CONTROL_ERROR, "DATA beyond the stream's flow-control window")
        stream.recv_unacked += length  # returned once the frame's messages are in (`_data_frame_done`)
        if stream.content_length is not None:
            stream.received += size
            if stream.received > stream.content_length:
                raise H2StreamError(stream_id, PROTOCOL_ERROR, "more DATA than its content-length")
        self._data_stream = stream
        if not size and not self._pad_left:
            self._data_frame_done()

    def _data_frame_done(self) -> None:
        stream, self._data_stream = self._data_stream, None
        if stream is None:
            return
        if not self._data_flags & END_STREAM:
            self.return_window(stream)
            return
        try:
            self._end_stream(stream)
        except H2StreamError as exc:
            self._stream_error(exc)

    def _end_stream(self, stream: Stream) -> None:
        stream.state = transition(stream.id, stream.state, RECV_END_STREAM)
        if stream.content_length is not None and stream.received != stream.content_length:
            raise H2StreamError(stream.id, PROTOCOL_ERROR, "DATA shorter than its content-length")
        if stream.state == CLOSED:
            self._forget(stream, cancel=False)
        else:
            self.calls.end(stream)

    def _block_started(self) -> None:
        self._header_deadline = self.loop.time() + self.limits.header_timeout_s
        self._arm(self._header_deadline)

    def _header_block(self, stream_id: int, flags: int, block: bytes, self_dependent: bool) -> None:
        """A complete header block: a new request, or the trailers of one."""
        self._header_deadline = None  # the block is complete (and the connection's first request has come)
        headers: list[tuple[bytes, bytes]] = []
        head = None
        size = 0
        if block == self._last_block:  # the same references to the same table entries: the same request
            head = self._last_head
        else:
            headers, size = self._decoder.decode(block)
            if not self._decoder.table_unchanged:
                self._last_block = None
        stream = self.streams.get(stream_id)
        if stream is not None:  # trailers: no pseudo-headers, and the request's end
            stream.state = transition(stream_id, stream.state, RECV_HEADERS)
            if not flags & END_STREAM or head is not None or any(name[:1] == b":" for name, _ in headers):
                raise H2StreamError(stream_id, PROTOCOL_ERROR, "trailers without END_STREAM or with pseudo-headers")
            self._end_stream(stream)
            return
        if not stream_id & 1:
            raise H2ConnectionError(PROTOCOL_ERROR, f"HEADERS on stream {stream_id}, an id only servers may use")
        if stream_id <= self.last_stream_id:  # (above it: idle, `ClosedStreams.state`)
            state = self.closed.state(stream_id, self.last_stream_id)
            transition(stream_id, state, RECV_HEADERS)
            return  # ignored (a late frame on a stream we reset)
        stream = Stream(stream_id, OPEN, self.outbox.initial_window, self.limits.initial_window_size)  # (from idle)
        self.last_stream_id = stream_id
        if self_dependent:
            raise H2StreamError(stream_id, PROTOCOL_ERROR, "a stream cannot depend on itself")
        if self.going_away or len(self.streams) >= self.limits.max_concurrent_streams:
            self._stream_error(H2StreamError(stream_id, REFUSED_STREAM, "over the concurrent stream limit"))
            return
        self.streams[stream_id] = stream
        self.idle.clear()
        if flags & END_STREAM:
            stream.state = transition(stream_id, stream.state, RECV_END_STREAM)
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
        self._spend(self._resets, "RST_STREAM frames")
        stream = self.streams.get(stream_id)
        if stream is None:
            transition(stream_id, self.closed.state(stream_id, self.last_stream_id), RECV_RST_STREAM)
            return
        stream.state = transition(stream_id, stream.state, RECV_RST_STREAM)
        self._forget(stream, cancel=True)

    def _on_settings(self, flags: int, stream_id: int, payload: memoryview) -> None:
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
        if flags & ACK:
            self.keepalive.acked(bytes(payload))
            return
        self._spend(self._ping_budget, "PING frames")
        if self._pings.too_many(self.loop.time(), not self.streams):
            raise H2ConnectionError(ENHANCE_YOUR_CALM, "too_many_pings")
        self.outbox.control(frame_header(8, PING, ACK, 0) + bytes(payload))

    def _on_goaway(self, flags: int, stream_id: int, payload: memoryview) -> None:
        if len(payload) < 8:
            raise H2ConnectionError(FRAME_SIZE_ERROR, "GOAWAY frame shorter than 8 bytes")
        self.going_away = True  # the client opens no more streams; those in progress go on

    def _on_window_update(self, flags: int, stream_id: int, payload: memoryview) -> None:
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
        stream.state = transition(stream_id, stream.state, RECV_WINDOW_UPDATE)
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
            stream.state = transition(exc.stream_id, stream.state, SEND_RST_STREAM)
            self._forget(stream, cancel=True)
        else:
            self.closed.add(exc.stream_id, CLOSED_RESET_BY_US)
        self._spend(self._resets, "RST_STREAM frames")

    def _local_end(self, stream: Stream) -> None:
        """Our END_STREAM is out. A client still sending gets RST_STREAM NO_ERROR: we need no more of it."""
        if stream.state == HALF_CLOSED_LOCAL:
            self.outbox.control(rst_stream_frame(stream.id, NO_ERROR))
            stream.state = transition(stream.id, stream.state, SEND_RST_STREAM)
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
        task = stream.task
        if task is None or task.done():
            # Nothing reads the call's context any more: the Stream <-> Context cycle goes now, not with the cyclic
            # garbage collector (a collection every few hundred requests, scanning every young object).
            stream.context = None
        elif cancel:
            task.cancel()
        if stream.queue is not None:
            stream.queue.put_nowait(None)
        if stream.drained is not None and not stream.drained.done():
            stream.drained.set_result(None)
        if stream.pending or stream.pending_size:
            self.outbox.drop(stream)
        else:  # (nothing of it waits to be sent: the common end of a call)
            self.outbox.blocked.pop(stream.id, None)
        stream.body = None
        stream.messages.clear()
        if not self.streams:
            self._idle_since = now = self.loop.time()
            self.idle.set()
            self._arm(now + self.limits.buffer_release_s)

    def _release_buffers(self) -> None:
        """An idle connection keeps no large buffer: the read buffer (if empty) and the spare message buffer go."""
        self._release_read_buffer()
        self.calls.drop_spares()
        self.closed.clear()

    # ---- timers: header and idle timeouts, idle buffers --------------------------------------------------------------
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
                    self._shut()
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
        self.goaway(code, reason)
        self._phase = CLOSING
        for stream in list(self.streams.values()):
            self._forget(stream, cancel=True)
        self._shut()

    def _shut(self) -> None:
        """Close after a GOAWAY so that it reaches the client: our side is shut once what we wrote is out, what the
        client still sends is read and dropped, and after CLOSE_LINGER_S the socket is closed whatever it does
        (closing at once with its bytes unread would make the kernel reset the connection, GOAWAY and all)."""
        transport = self.transport
        self._phase = CLOSING
        if transport is None or transport.is_closing():
            return
        if transport.can_write_eof():
            transport.write_eof()
        self._linger = self.loop.call_later(CLOSE_LINGER_S, transport.abort)

    def eof_received(self) -> bool:
        return False  # the client is done: asyncio closes the transport

    def goaway(self, code: int = NO_ERROR, reason: str = "") -> None:
        """Tell the client to open no new streams here (server stop); calls in progress go on."""
        self.going_away = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(goaway_frame(self.last_stream_id, code, reason))

    def close(self) -> None:
        """Close the connection; one whose client does not take its last bytes is aborted after a while."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.close()
        if transport.get_write_buffer_size():
            self._linger = self.loop.call_later(CLOSE_LINGER_S, transport.abort)
