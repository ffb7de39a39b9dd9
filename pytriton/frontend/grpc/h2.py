"""gRPC's HTTP/2 transport on asyncio, in this process, without grpcio's server.

grpc.aio runs every call through its Cython layer on the event loop's thread (about 0.6 ms of CPU per
small ModelInfer here, more with a large tensor: the message is copied three times inside grpc on the way
in). This is the subset of HTTP/2 (RFC 9113) a gRPC server needs, written for that one job:

* frames are parsed from one per-connection buffer; HPACK header blocks are decoded by the `hpack`
  package (dynamic table, Huffman) and responses are encoded with literal fields (no dynamic table);
* a DATA payload is copied once, into the message's own buffer, and a large message is received by the
  socket straight into that buffer (`asyncio.BufferedProtocol`), reused for the next same-sized message
  once nothing refers to it;
* flow control both ways (large receive windows, WINDOW_UPDATE as they are used; responses wait for the
  client's windows), PING, SETTINGS, RST_STREAM (cancels the call), GOAWAY on stop;
* gRPC on top: length-prefixed messages, gzip/deflate request messages, `grpc-timeout` deadlines,
  metadata (`-bin` values base64-decoded), status and message in trailers (trailers-only for errors).

Method handlers keep grpc.aio's shape (`await handler(request, context)`, async generators for streams)
and the context offers what our servicers use: `invocation_metadata()`, `peer()`, `abort()`.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import logging
import re
import struct
import sys
import zlib
from typing import Any, AsyncIterator, Callable

import grpc
import hpack

logger = logging.getLogger("pytriton.frontend")

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types, flags, settings and error codes (RFC 9113 section 6, 7, 11).
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
S_HEADER_TABLE_SIZE, S_ENABLE_PUSH, S_MAX_CONCURRENT_STREAMS, S_INITIAL_WINDOW_SIZE, S_MAX_FRAME_SIZE = 1, 2, 3, 4, 5
S_MAX_HEADER_LIST_SIZE = 6
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR = 0, 1, 2, 3
FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR = 6, 7, 8, 9

MAX_CONCURRENT_STREAMS = 4096
WINDOW = 1 << 24  # what we let a client send ahead, per stream and per connection (refilled as it arrives)
MAX_FRAME = (1 << 24) - 1  # the largest frame we accept: a client may send a whole tensor in one DATA frame
MAX_HEADER_LIST = 1 << 16
READ_BUFFER = 64 * 1024  # per connection; large messages bypass it (received straight into their buffers)
DIRECT_MIN = 64 * 1024  # a message of at least this size is received by the socket straight into its buffer
SPARE_MAX = 64 << 20  # the largest message buffer a connection keeps for reuse
STREAM_SEND_BACKLOG = 4 << 20  # a streaming handler waits while this much of its output awaits the client
MAX_GRPC_MESSAGE = 8 * 1024  # longer status messages are cut (clients limit the size of trailers)
LARGE_PART = 64 * 1024  # a response buffer at least this large is written on its own, not joined

_FRAME = struct.Struct(">HBBBL")  # 24-bit length as 16 + 8 bits, type, flags, stream id
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_TIMEOUT = re.compile(r"^(\d{1,8})([HMSmun])$")
_RESERVED_METADATA = frozenset((b"te", b"content-type", b"grpc-timeout", b"grpc-encoding", b"grpc-accept-encoding"))


def frame_header(length: int, ftype: int, flags: int, stream_id: int) -> bytes:
    return _FRAME.pack(length >> 8, length & 0xFF, ftype, flags, stream_id)


def _hpack_int(value: int, prefix_bits: int, flags: int = 0) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((flags | value,))
    out = bytearray((flags | limit,))
    value -= limit
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _literal(name: bytes, value: bytes) -> bytes:
    """A header field as an HPACK literal without indexing, new name, no Huffman coding."""
    return b"\x00" + _hpack_int(len(name), 7) + name + _hpack_int(len(value), 7) + value


# ":status: 200" is entry 8 of HPACK's static table; "content-type" is entry 31 (literal, indexed name).
_RESPONSE_HEADERS = (
    b"\x88" + b"\x0f\x10" + _hpack_int(16, 7) + b"application/grpc"
    + _literal(b"grpc-accept-encoding", b"identity,deflate,gzip")
)
_TRAILERS_OK = _literal(b"grpc-status", b"0")


def _percent_encode(message: str) -> bytes:
    raw = message.encode("utf-8", "replace")[:MAX_GRPC_MESSAGE]
    if all(0x20 <= b <= 0x7E and b != 0x25 for b in raw):
        return raw
    return b"".join(bytes((b,)) if 0x20 <= b <= 0x7E and b != 0x25 else b"%%%02X" % b for b in raw)


def _status_block(code: grpc.StatusCode, message: str) -> bytes:
    block = _literal(b"grpc-status", str(code.value[0]).encode())
    if message:
        block += _literal(b"grpc-message", _percent_encode(message))
    return block


def _size(part: Any) -> int:
    return part.nbytes if isinstance(part, memoryview) else len(part)


def _as_bytes_view(part: Any) -> memoryview:
    view = part if isinstance(part, memoryview) else memoryview(part)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
    return view


class RpcAbort(Exception):
    """Raised by `Context.abort`: ends the call with this status."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code = code
        self.details = details


class Method:
    """One RPC: its handler and (de)serialisers. `serialize` returns the message as a list of buffers."""

    __slots__ = ("handler", "deserialize", "serialize", "client_streaming", "server_streaming")

    def __init__(
        self,
        handler: Callable[..., Any],
        deserialize: Callable[[Any], Any],
        serialize: Callable[[Any], list[Any]],
        client_streaming: bool = False,
        server_streaming: bool = False,
    ):
        self.handler = handler
        self.deserialize = deserialize
        self.serialize = serialize
        self.client_streaming = client_streaming
        self.server_streaming = server_streaming


class Context:
    """The part of grpc.aio's ServicerContext our servicers use."""

    __slots__ = ("_stream", "_peer", "code", "details")

    def __init__(self, stream: "_Stream", peer: str):
        self._stream = stream
        self._peer = peer
        self.code: grpc.StatusCode | None = None  # set_code/set_details: the status the call ends with
        self.details = ""

    def invocation_metadata(self) -> tuple[tuple[str, Any], ...]:
        return self._stream.metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        deadline = self._stream.deadline
        return None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())

    def cancelled(self) -> bool:
        return self._stream.reset

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise RpcAbort(code, details)

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    def status(self) -> tuple[grpc.StatusCode, str] | None:
        """The status a handler chose with set_code, if any (grpc's generated base methods do that)."""
        if self.code is None or self.code is grpc.StatusCode.OK:
            return None
        return self.code, self.details


class _Stream:
    __slots__ = (
        "id", "method", "metadata", "encoding", "deadline", "timer", "task", "context",
        "head", "head_fill", "body", "fill", "expect", "compressed", "messages", "queue", "recv_closed", "recv_unacked",
        "send_window", "pending", "pending_size", "keep", "trailers", "headers_sent", "done", "reset",
        "drained",
    )  # fmt: skip

    def __init__(self, stream_id: int, send_window: int):
        self.id = stream_id
        self.method: Method | None = None
        self.metadata: tuple[tuple[str, Any], ...] = ()
        self.encoding: str | None = None
        self.deadline: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task | None = None
        self.context: Context | None = None
        # receiving: the 5-byte message prefix, then the message body
        self.head = bytearray(5)
        self.head_fill = 0
        self.body: bytearray | None = None
        self.fill = 0
        self.expect = 0  # the body's declared length (`body` grows towards it when not allocated up front)
        self.compressed = False
        self.messages: list[Any] = []  # complete messages of a unary call
        self.queue: asyncio.Queue | None = None  # complete messages of a client-streaming call (None ends it)
        self.recv_closed = False
        self.recv_unacked = 0
        # sending
        self.send_window = send_window
        self.pending: collections.deque[memoryview] = collections.deque()
        self.pending_size = 0
        self.keep: list[Any] = []  # what the pending buffers belong to, kept alive until they are written
        self.trailers: bytes | None = None
        self.headers_sent = False
        self.done = False  # our END_STREAM is out (or the stream was reset)
        self.reset = False
        self.drained: asyncio.Future | None = None


class GrpcConnection(asyncio.BufferedProtocol):
    """One client connection: HTTP/2 frames in, RPCs dispatched to `methods`, responses out."""

    def __init__(self, methods: dict[bytes, Method], connections: set["GrpcConnection"] | None = None):
        self.methods = methods
        self.connections = connections
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self._buf = bytearray(READ_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._preface = False
        self._direct: memoryview | None = None  # the part of a message body handed to the socket
        # the DATA frame being received
        self._data_left = 0
        self._pad_left = 0
        self._data_stream: _Stream | None = None
        self._data_flags = 0
        # a header block spread over HEADERS + CONTINUATION frames
        self._block: bytearray | None = None
        self._block_stream = 0
        self._block_flags = 0
        self._decoder = hpack.Decoder()
        self._decoder.max_header_list_size = MAX_HEADER_LIST
        self.streams: dict[int, _Stream] = {}
        self.last_stream_id = 0
        self._recv_unacked = 0
        self._peer_window = 65535  # the client's initial stream window (SETTINGS_INITIAL_WINDOW_SIZE)
        self._peer_max_frame = 16384
        self._send_window = 65535  # connection-level window the client gave us
        self._blocked: dict[int, _Stream] = {}  # streams with output waiting for a window
        self._spare: bytearray | None = None
        self._held: list[Any] = []  # owners of buffers the transport may still hold (see `_write`)
        self.going_away = False
        self.idle: asyncio.Event = asyncio.Event()
        self.idle.set()

    # ---- asyncio protocol ----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
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
        settings = struct.pack(
            ">HLHLHLHL",
            S_MAX_CONCURRENT_STREAMS, MAX_CONCURRENT_STREAMS,
            S_INITIAL_WINDOW_SIZE, WINDOW,
            S_MAX_FRAME_SIZE, MAX_FRAME,
            S_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST,
        )  # fmt: skip
        self.transport.write(
            frame_header(len(settings), SETTINGS, 0, 0) + settings
            + frame_header(4, WINDOW_UPDATE, 0, 0) + struct.pack(">L", WINDOW - 65535)
        )  # fmt: skip

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.connections is not None:
            self.connections.discard(self)
        for stream in list(self.streams.values()):
            self._forget(stream, cancel=True)
        self.streams.clear()
        self._blocked.clear()
        self._held.clear()
        self.idle.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._start == self._end:
            self._start = self._end = 0
            stream = self._data_stream
            if self._data_left and stream is not None and stream.body is not None:
                room = len(stream.body) - stream.fill
                if room >= DIRECT_MIN:
                    self._direct = memoryview(stream.body)[stream.fill : stream.fill + min(room, self._data_left)]
                    return self._direct
        elif len(self._buf) - self._end < 16384:
            self._compact(0)
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            direct = self._direct
            if direct is not None:
                self._direct = None
                stream = self._data_stream
                stream.fill += nbytes  # type: ignore[union-attr]
                self._data_left -= nbytes
                if stream.fill == stream.expect:  # type: ignore[union-attr]
                    self._message_complete(stream)  # type: ignore[arg-type]
                if not self._data_left and not self._pad_left:
                    self._data_frame_done()
                return
            self._end += nbytes
            self._process()
        except _ConnectionError as exc:
            self._fail(exc.code, str(exc))
        except Exception:  # noqa: BLE001 - a bug here must not take the event loop down
            logger.exception("gRPC connection from %s failed", self.peer)
            self._fail(INTERNAL_ERROR, "internal error")

    def _compact(self, need: int) -> None:
        """Move the unparsed bytes to the front; grow the buffer when a frame needs more room."""
        pending = self._end - self._start
        if need > len(self._buf):
            buffer = bytearray(max(need, 2 * len(self._buf)))
            buffer[:pending] = self._view[self._start : self._end]
            self._view.release()
            self._buf, self._view = buffer, memoryview(buffer)
        elif self._start:
            self._buf[:pending] = self._view[self._start : self._end]
        self._start, self._end = 0, pending

    # ---- frames in -----------------------------------------------------------------------------------
    def _process(self) -> None:
        view = self._view
        while True:
            start, end = self._start, self._end
            if self._data_left:
                if start == end:
                    return
                take = min(end - start, self._data_left)
                if self._data_stream is not None:
                    self._feed(self._data_stream, view[start : start + take])
                self._start = start + take
                self._data_left -= take
                if self._data_left:
                    return
                if not self._pad_left:
                    self._data_frame_done()
                continue
            if self._pad_left:
                take = min(end - start, self._pad_left)
                self._start = start + take
                self._pad_left -= take
                if self._pad_left:
                    return
                self._data_frame_done()
                continue
            if not self._preface:
                if end - start < len(PREFACE):
                    if view[start:end] != PREFACE[: end - start]:
                        raise _ConnectionError(PROTOCOL_ERROR, "not an HTTP/2 connection preface")
                    return
                if view[start : start + len(PREFACE)] != PREFACE:
                    raise _ConnectionError(PROTOCOL_ERROR, "not an HTTP/2 connection preface")
                self._preface = True
                self._start = start + len(PREFACE)
                continue
            if end - start < 9:
                return
            high, low, ftype, flags, stream_id = _FRAME.unpack_from(view, start)
            length = (high << 8) | low
            stream_id &= 0x7FFFFFFF
            if length > MAX_FRAME:
                raise _ConnectionError(FRAME_SIZE_ERROR, f"frame of {length} bytes")
            if ftype == DATA:
                if flags & PADDED and end - start < 10:  # its pad length byte has not arrived yet
                    return
                self._start = start + 9
                self._data_frame(length, flags, stream_id)
                continue
            if end - start < 9 + length:
                if 9 + length > len(self._buf) - start:
                    self._compact(9 + length)
                return
            self._start = start + 9 + length
            self._frame(ftype, flags, stream_id, view[start + 9 : start + 9 + length])
            if self.transport is None:
                return

    def _data_frame(self, length: int, flags: int, stream_id: int) -> None:
        if self._block is not None or stream_id == 0:
            raise _ConnectionError(PROTOCOL_ERROR, "unexpected DATA frame")
        pad = 0
        if flags & PADDED:
            pad = self._view[self._start]
            self._start += 1
            if pad >= length:
                raise _ConnectionError(PROTOCOL_ERROR, "padding longer than the frame")
            self._data_left, self._pad_left = length - 1 - pad, pad
        else:
            self._data_left, self._pad_left = length, 0
        stream = self.streams.get(stream_id)
        if stream is not None and stream.recv_closed:
            stream = None
        self._data_stream = stream
        self._data_flags = flags
        self._consumed(stream, length)
        if not self._data_left and not self._pad_left:
            self._data_frame_done()

    def _data_frame_done(self) -> None:
        stream, self._data_stream = self._data_stream, None
        if stream is not None and self._data_flags & END_STREAM:
            self._end_of_input(stream)

    def _consumed(self, stream: _Stream | None, length: int) -> None:
        """Flow control: give the client back what it has sent once half a window is used."""
        if not length:
            return
        self._recv_unacked += length
        out = b""
        if self._recv_unacked >= WINDOW // 2:
            out = frame_header(4, WINDOW_UPDATE, 0, 0) + struct.pack(">L", self._recv_unacked)
            self._recv_unacked = 0
        if stream is not None and not stream.recv_closed:
            stream.recv_unacked += length
            if stream.recv_unacked >= WINDOW // 2:
                out += frame_header(4, WINDOW_UPDATE, 0, stream.id) + struct.pack(">L", stream.recv_unacked)
                stream.recv_unacked = 0
        if out and self.transport is not None:
            self.transport.write(out)

    def _frame(self, ftype: int, flags: int, stream_id: int, payload: memoryview) -> None:
        if self._block is not None and ftype != CONTINUATION:
            raise _ConnectionError(PROTOCOL_ERROR, "header block interrupted")
        if ftype == HEADERS:
            if stream_id == 0:
                raise _ConnectionError(PROTOCOL_ERROR, "HEADERS on stream 0")
            pos, end = 0, len(payload)
            if flags & PADDED:
                end -= payload[0]
                pos = 1
            if flags & PRIORITY_FLAG:
                pos += 5
            if pos > end:
                raise _ConnectionError(PROTOCOL_ERROR, "malformed HEADERS frame")
            self._block = bytearray(payload[pos:end])
            self._block_stream, self._block_flags = stream_id, flags
            if flags & END_HEADERS:
                self._header_block_done()
        elif ftype == CONTINUATION:
            if self._block is None or stream_id != self._block_stream:
                raise _ConnectionError(PROTOCOL_ERROR, "unexpected CONTINUATION frame")
            self._block += payload
            if len(self._block) > 4 * MAX_HEADER_LIST:
                raise _ConnectionError(PROTOCOL_ERROR, "header block too large")
            if flags & END_HEADERS:
                self._header_block_done()
        elif ftype == SETTINGS:
            if flags & ACK:
                return
            if stream_id or len(payload) % 6:
                raise _ConnectionError(FRAME_SIZE_ERROR, "malformed SETTINGS frame")
            for pos in range(0, len(payload), 6):
                key, value = struct.unpack_from(">HL", payload, pos)
                if key == S_INITIAL_WINDOW_SIZE:
                    if value > 0x7FFFFFFF:
                        raise _ConnectionError(FLOW_CONTROL_ERROR, "initial window too large")
                    delta = value - self._peer_window
                    self._peer_window = value
                    for stream in self.streams.values():
                        stream.send_window += delta
                elif key == S_MAX_FRAME_SIZE:
                    if not 16384 <= value <= MAX_FRAME:
                        raise _ConnectionError(PROTOCOL_ERROR, "invalid SETTINGS_MAX_FRAME_SIZE")
                    self._peer_max_frame = value
                elif key == S_HEADER_TABLE_SIZE:
                    pass  # we never insert into the client's decoder table
            self._write([frame_header(0, SETTINGS, ACK, 0)])
            self._flush_blocked()
        elif ftype == PING:
            if len(payload) != 8 or stream_id:
                raise _ConnectionError(FRAME_SIZE_ERROR, "malformed PING frame")
            if not flags & ACK:
                self._write([frame_header(8, PING, ACK, 0) + bytes(payload)])
        elif ftype == WINDOW_UPDATE:
            if len(payload) != 4:
                raise _ConnectionError(FRAME_SIZE_ERROR, "malformed WINDOW_UPDATE frame")
            increment = struct.unpack_from(">L", payload)[0] & 0x7FFFFFFF
            if stream_id == 0:
                self._send_window += increment
                self._flush_blocked()
            else:
                stream = self.streams.get(stream_id)
                if stream is not None:
                    stream.send_window += increment
                    if stream.pending or stream.trailers is not None:
                        self._flush(stream)
        elif ftype == RST_STREAM:
            stream = self.streams.get(stream_id)
            if stream is not None:
                stream.reset = True
                self._forget(stream, cancel=True)
        elif ftype == GOAWAY:
            self.going_away = True
        elif ftype == PUSH_PROMISE:
            raise _ConnectionError(PROTOCOL_ERROR, "PUSH_PROMISE from a client")
        # PRIORITY and unknown frame types are ignored

    def _header_block_done(self) -> None:
        block, self._block = self._block, None
        stream_id, flags = self._block_stream, self._block_flags
        raw = bytes(block)  # type: ignore[arg-type]
        try:
            if raw and min(raw) > 0x80 and max(raw) < 0xFF:
                # Every field is a one-byte reference to a table entry (a client repeating the same call): no
                # table changes, so look them up directly (the general decoder costs ~10x more).
                table = self._decoder.header_table
                headers = [table.get_by_index(b & 0x7F) for b in raw]
            else:
                headers = self._decoder.decode(raw, raw=True)
        except hpack.HPACKError as exc:
            raise _ConnectionError(COMPRESSION_ERROR, f"bad header block: {exc}") from None
        stream = self.streams.get(stream_id)
        if stream is not None:  # trailers from the client: only END_STREAM matters
            if flags & END_STREAM:
                self._end_of_input(stream)
            return
        if stream_id <= self.last_stream_id or not stream_id & 1:
            return  # a closed stream (or a server-side id): nothing to do
        self.last_stream_id = stream_id
        if self.going_away or len(self.streams) >= MAX_CONCURRENT_STREAMS:
            self._write([frame_header(4, RST_STREAM, 0, stream_id) + struct.pack(">L", REFUSED_STREAM)])
            return
        stream = _Stream(stream_id, self._peer_window)
        self.streams[stream_id] = stream
        self.idle.clear()
        self._start_call(stream, headers)
        if flags & END_STREAM and not stream.done:
            self._end_of_input(stream)

    # ---- calls -----------------------------------------------------------------------------------------
    def _start_call(self, stream: _Stream, headers: list[tuple[bytes, bytes]]) -> None:
        path = b""
        metadata: list[tuple[str, Any]] = []
        timeout = None
        for name, value in headers:
            if name[:1] == b":":
                if name == b":path":
                    path = value
                continue
            if name == b"grpc-timeout":
                timeout = value
            elif name == b"grpc-encoding":
                stream.encoding = value.decode("latin-1")
            if name in _RESERVED_METADATA:
                continue
            key = name.decode("latin-1")
            if key.endswith("-bin"):
                try:
                    metadata.append((key, base64.b64decode(value + b"=" * (-len(value) % 4))))
                except ValueError:
                    continue
            else:
                metadata.append((key, value.decode("latin-1")))
        stream.metadata = tuple(metadata)
        method = self.methods.get(path)
        if method is None:
            self._finish(stream, grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
            return
        if stream.encoding not in (None, "identity", "gzip", "deflate"):
            self._finish(stream, grpc.StatusCode.UNIMPLEMENTED, f"Compression algorithm '{stream.encoding}' is not supported")
            return
        stream.method = method
        stream.context = Context(stream, self.peer)
        if timeout is not None:
            match = _TIMEOUT.match(timeout.decode("latin-1"))
            if match is None:
                self._finish(stream, grpc.StatusCode.INTERNAL, f"Invalid grpc-timeout '{timeout.decode('latin-1')}'")
                return
            seconds = int(match.group(1)) * _TIMEOUT_UNITS[match.group(2)]
            stream.deadline = self.loop.time() + seconds
            stream.timer = self.loop.call_later(seconds, self._deadline, stream)
        if method.client_streaming:
            stream.queue = asyncio.Queue()
            stream.task = self.loop.create_task(self._run_streaming(stream, method, self._requests(stream)))

    def _feed(self, stream: _Stream, data: memoryview) -> None:
        """Append DATA bytes to the stream's messages (5-byte prefix: compressed flag, length)."""
        pos, size = 0, len(data)
        while pos < size:
            body = stream.body
            if body is None:
                if stream.head_fill == 0 and size - pos >= 5:  # the common case: the prefix in one piece
                    flag, length = data[pos], int.from_bytes(data[pos + 1 : pos + 5], "big")
                    pos += 5
                else:
                    take = min(5 - stream.head_fill, size - pos)
                    stream.head[stream.head_fill : stream.head_fill + take] = data[pos : pos + take]
                    stream.head_fill += take
                    pos += take
                    if stream.head_fill < 5:
                        return
                    stream.head_fill = 0
                    flag, length = stream.head[0], int.from_bytes(stream.head[1:5], "big")
                if length > 0x7FFFFFFF:
                    self._finish(stream, grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 f"Received message larger than max ({length} vs. {0x7FFFFFFF})")
                    self._data_stream = None
                    return
                stream.compressed = bool(flag & 1)
                if size - pos >= length and length < DIRECT_MIN:
                    stream.body = None
                    self._deliver(stream, bytes(data[pos : pos + length]))
                    pos += length
                    continue
                stream.body = self._message_buffer(length)
                stream.fill = 0
                stream.expect = length
                if not length:
                    self._message_complete(stream)
                continue
            take = min(stream.expect - stream.fill, size - pos)
            if len(body) > stream.fill:
                body[stream.fill : stream.fill + take] = data[pos : pos + take]
            else:  # a very large message grows as it arrives
                body += data[pos : pos + take]
            stream.fill += take
            pos += take
            if stream.fill == stream.expect:
                self._message_complete(stream)

    def _message_buffer(self, size: int) -> bytearray:
        """A large message's buffer: the connection's previous one when it has this size and nothing refers to
        it any more (clients send same-sized tensors over and over), else a new one."""
        if size < DIRECT_MIN:
            return bytearray(size)
        if size > SPARE_MAX:
            # Not kept for reuse, and not allocated up front either: memory follows the bytes that arrive (a
            # client declaring 2 GiB and sending nothing costs nothing).
            return bytearray()
        spare = self._spare
        if spare is not None and len(spare) == size and sys.getrefcount(spare) == 3:  # attribute, local, argument
            return spare
        self._spare = buffer = bytearray(size)
        return buffer

    def _message_complete(self, stream: _Stream) -> None:
        body, stream.body = stream.body, None
        self._deliver(stream, body)

    def _deliver(self, stream: _Stream, message: Any) -> None:
        if stream.done:
            return
        if stream.compressed:
            try:
                if stream.encoding == "gzip":
                    message = zlib.decompress(message, 31)
                elif stream.encoding == "deflate":
                    message = zlib.decompress(message)
                else:
                    self._finish(stream, grpc.StatusCode.INTERNAL, "compressed message without grpc-encoding")
                    return
            except zlib.error as exc:
                self._finish(stream, grpc.StatusCode.INTERNAL, f"cannot decompress the request: {exc}")
                return
        if stream.queue is not None:
            stream.queue.put_nowait(message)
        else:
            stream.messages.append(message)

    def _end_of_input(self, stream: _Stream) -> None:
        if stream.recv_closed:
            return
        stream.recv_closed = True
        if stream.done:
            self._forget(stream, cancel=False)
            return
        if stream.queue is not None:
            stream.queue.put_nowait(None)
            return
        method = stream.method
        if method is None:
            return
        if stream.body is not None or stream.head_fill:
            self._finish(stream, grpc.StatusCode.INTERNAL, "the request ended inside a message")
            return
        if len(stream.messages) != 1:
            self._finish(stream, grpc.StatusCode.UNIMPLEMENTED if stream.messages else grpc.StatusCode.INTERNAL,
                         "expected exactly one request message" if stream.messages else "no request message")
            return
        try:
            request = method.deserialize(stream.messages.pop())
        except Exception:  # noqa: BLE001 - the client sent something protobuf cannot read
            self._finish(stream, grpc.StatusCode.INTERNAL, "Exception deserializing request!")
            return
        if method.server_streaming:
            stream.task = self.loop.create_task(self._run_streaming(stream, method, request))
        else:
            stream.task = self.loop.create_task(self._run_unary(stream, method, request))

    async def _requests(self, stream: _Stream) -> AsyncIterator[Any]:
        queue, method = stream.queue, stream.method
        while True:
            message = await queue.get()  # type: ignore[union-attr]
            if message is None:
                return
            try:
                request = method.deserialize(message)  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001
                raise RpcAbort(grpc.StatusCode.INTERNAL, "Exception deserializing request!") from None
            yield request

    async def _run_unary(self, stream: _Stream, method: Method, request: Any) -> None:
        context = stream.context
        try:
            response = await method.handler(request, context)
            chosen = context.status()  # type: ignore[union-attr]
            if chosen is not None:
                raise RpcAbort(*chosen)
            if response is None:
                raise RpcAbort(grpc.StatusCode.INTERNAL, "the method returned no response")
            parts = method.serialize(response)
        except RpcAbort as exc:
            self._finish(stream, exc.code, exc.details)
            return
        except asyncio.CancelledError:
            return  # reset by the client, past its deadline, or the server is stopping
        except Exception as exc:  # noqa: BLE001 - a handler bug answers UNKNOWN, as grpc does
            self._handler_failed(stream, exc)
            return
        self._send_message(stream, parts, response, last=True)

    async def _run_streaming(self, stream: _Stream, method: Method, request: Any) -> None:
        responses = method.handler(request, stream.context)
        try:
            async for response in responses:
                self._send_message(stream, method.serialize(response), response)
                if stream.pending_size > STREAM_SEND_BACKLOG and not stream.done:
                    stream.drained = self.loop.create_future()
                    await stream.drained
                if stream.done:
                    return
        except RpcAbort as exc:
            self._finish(stream, exc.code, exc.details)
            return
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001
            self._handler_failed(stream, exc)
            return
        finally:
            await responses.aclose()
        chosen = stream.context.status()  # type: ignore[union-attr]
        self._finish(stream, *(chosen or (grpc.StatusCode.OK, "")))

    def _handler_failed(self, stream: _Stream, exc: Exception) -> None:
        """A handler raised: the status it chose with set_code, else UNKNOWN as grpc answers (and a log entry)."""
        chosen = stream.context.status()  # type: ignore[union-attr]
        if chosen is None:
            logger.exception("gRPC method failed")
        self._finish(stream, *(chosen or (grpc.StatusCode.UNKNOWN, f"Unexpected {type(exc)}: {exc}")))

    def _deadline(self, stream: _Stream) -> None:
        stream.timer = None
        if stream.done:
            return
        task = stream.task
        self._finish(stream, grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
        if task is not None and not task.done():
            task.cancel()

    # ---- frames out ------------------------------------------------------------------------------------
    def _send_message(self, stream: _Stream, parts: list[Any], owner: Any, last: bool = False) -> None:
        """Send one response message; with `last` the call ends OK after it (a unary answer: headers, message
        and trailers in one write when the windows allow it)."""
        if stream.done or self.transport is None:
            return
        size = 0
        for part in parts:
            size += _size(part)
        out: list[Any] = []
        if not stream.headers_sent:
            stream.headers_sent = True
            out.append(frame_header(len(_RESPONSE_HEADERS), HEADERS, END_HEADERS, stream.id) + _RESPONSE_HEADERS)
        prefix = b"\x00" + size.to_bytes(4, "big")
        if not stream.pending and size + 5 <= min(self._send_window, stream.send_window, self._peer_max_frame):
            out.append(frame_header(size + 5, DATA, 0, stream.id) + prefix)  # all of it in one frame, now
            out.extend(parts)
            self._send_window -= size + 5
            stream.send_window -= size + 5
            if last:
                out.append(frame_header(len(_TRAILERS_OK), HEADERS, END_HEADERS | END_STREAM, stream.id) + _TRAILERS_OK)
                stream.done = True
            if self._write(out):
                self._held.append(owner)
            if last:
                self._forget(stream, cancel=False)
            return
        if out:
            self._write(out)
        stream.pending.append(memoryview(prefix))
        for part in parts:
            if _size(part):
                stream.pending.append(_as_bytes_view(part))
        stream.pending_size += size + 5
        stream.keep.append(owner)
        self._flush(stream)
        if last:
            self._finish(stream, grpc.StatusCode.OK, "")

    def _finish(self, stream: _Stream, code: grpc.StatusCode, message: str) -> None:
        """End the call with this status (after any output still waiting for a window)."""
        if stream.done or stream.trailers is not None:
            return
        if stream.headers_sent:
            stream.trailers = _TRAILERS_OK if code is grpc.StatusCode.OK and not message else _status_block(code, message)
        else:  # trailers-only response
            stream.headers_sent = True
            stream.trailers = _RESPONSE_HEADERS + _status_block(code, message)
        self._flush(stream)

    def _flush(self, stream: _Stream) -> None:
        """Send what the windows allow of the stream's pending output; then its trailers."""
        out: list[Any] = []
        pending = stream.pending
        while pending:
            room = min(self._send_window, stream.send_window, self._peer_max_frame)
            if room <= 0:
                break
            frame: list[Any] = []
            size = 0
            while pending and size < room:
                chunk = pending[0]
                take = min(len(chunk), room - size)
                if take == len(chunk):
                    frame.append(pending.popleft())
                else:
                    frame.append(chunk[:take])
                    pending[0] = chunk[take:]
                size += take
            out.append(frame_header(size, DATA, 0, stream.id))
            out.extend(frame)
            self._send_window -= size
            stream.send_window -= size
            stream.pending_size -= size
        if pending:
            self._blocked[stream.id] = stream
        else:
            self._blocked.pop(stream.id, None)
            trailers = stream.trailers
            if trailers is not None and not stream.done:
                if len(trailers) > self._peer_max_frame:  # a long status message: cut to fit one frame
                    trailers = trailers[: self._peer_max_frame]
                out.append(frame_header(len(trailers), HEADERS, END_HEADERS | END_STREAM, stream.id) + trailers)
                stream.done = True
        if out and self._write(out):
            self._held.extend(stream.keep)
        if not pending:
            stream.keep.clear()
        if stream.drained is not None and (stream.pending_size <= STREAM_SEND_BACKLOG // 2 or stream.done):
            if not stream.drained.done():
                stream.drained.set_result(None)
            stream.drained = None
        if stream.done:
            self._forget(stream, cancel=False)

    def _flush_blocked(self) -> None:
        for stream in list(self._blocked.values()):
            if self._send_window <= 0:
                return
            self._flush(stream)

    def _write(self, out: list[Any]) -> bool:
        """Write frames and buffers in order; True when the transport still holds one of `out`'s buffers itself
        (then whatever owns them must stay alive until `resume_writing`)."""
        transport = self.transport
        if transport is None:
            return False
        by_reference = False
        small: list[Any] = []
        for part in out:
            if _size(part) < LARGE_PART:
                small.append(part)
                continue
            # A tensor goes out on its own, straight from its buffer (a join would copy all of it first).
            if small:
                by_reference |= self._write_joined(transport, small)
                small = []
            transport.write(part)
            by_reference = True
        if small:
            by_reference |= self._write_joined(transport, small)
        # What the socket does not take at once stays in the transport's buffer: Python 3.11 copies it there, 3.12
        # keeps a view of our buffer (which may be a worker's output segment, released once its owner is gone).
        return by_reference and transport.get_write_buffer_size() > 0

    @staticmethod
    def _write_joined(transport: asyncio.Transport, parts: list[Any]) -> bool:
        if len(parts) == 1:
            part = parts[0]
            transport.write(part)
            return not isinstance(part, bytes)
        transport.write(b"".join(parts))
        return False

    def pause_writing(self) -> None:
        """The transport holds unsent data (the write buffer limits are 0: this comes with the first byte)."""

    def resume_writing(self) -> None:
        """The transport's buffer is empty: the buffers it held may go back to their owners."""
        self._held.clear()

    def _forget(self, stream: _Stream, cancel: bool) -> None:
        if self.streams.pop(stream.id, None) is None and not cancel:
            return
        stream.done = True
        self._blocked.pop(stream.id, None)
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
        stream.pending.clear()
        stream.keep.clear()
        if not self.streams:
            self.idle.set()

    def _fail(self, code: int, reason: str) -> None:
        logger.debug("closing the gRPC connection from %s: %s", self.peer, reason)
        if self.transport is not None:
            self.goaway(code, reason)
            self.transport.close()

    def goaway(self, code: int = NO_ERROR, reason: str = "") -> None:
        """Tell the client to open no new streams here (server stop); calls in progress go on."""
        self.going_away = True
        debug = reason.encode("utf-8", "replace")[:256]
        self._write([frame_header(8 + len(debug), GOAWAY, 0, 0) + struct.pack(">LL", self.last_stream_id, code) + debug])

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _ConnectionError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
