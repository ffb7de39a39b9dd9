"""A raw HTTP/2 client for conformance and abuse tests: hand-made frames out, frames in, and the checks h2spec
makes (connection error: GOAWAY with a code, then the connection closes; stream error: RST_STREAM with a code,
or GOAWAY with it; a frame of some type), stricter where h2spec also accepts a bare close.
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import time
from collections.abc import Sequence

import hpack

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM = ACK = 0x1
END_HEADERS, PADDED, PRIORITY_FLAG = 0x4, 0x8, 0x20
S_HEADER_TABLE_SIZE, S_ENABLE_PUSH, S_MAX_CONCURRENT_STREAMS, S_INITIAL_WINDOW_SIZE, S_MAX_FRAME_SIZE = 1, 2, 3, 4, 5
S_MAX_HEADER_LIST_SIZE = 6
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED = 0, 1, 2, 3, 4, 5
FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, CONNECT_ERROR, ENHANCE_YOUR_CALM = 6, 7, 8, 9, 10, 11
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SERVICE = "/inference.GRPCInferenceService"


def frame(ftype: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return struct.pack(">HBBBL", len(payload) >> 8, len(payload) & 0xFF, ftype, flags, stream_id) + payload


def settings(*pairs: tuple[int, int]) -> bytes:
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HL", key, value) for key, value in pairs))


def window_update(stream_id: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, stream_id, struct.pack(">L", increment))


def rst_stream(stream_id: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, stream_id, struct.pack(">L", code))


def priority(stream_id: int, depends_on: int = 0, weight: int = 255, exclusive: bool = False) -> bytes:
    return frame(PRIORITY, 0, stream_id, struct.pack(">LB", depends_on | (exclusive << 31), weight))


def ping(data: bytes = bytes(8), ack: bool = False) -> bytes:
    return frame(PING, ACK if ack else 0, 0, data)


def goaway(last_stream_id: int, code: int, debug: bytes = b"") -> bytes:
    return frame(GOAWAY, 0, 0, struct.pack(">LL", last_stream_id, code) + debug)


def grpc_message(body: bytes) -> bytes:
    return b"\x00" + len(body).to_bytes(4, "big") + body


@dataclasses.dataclass
class Frame:
    type: int
    flags: int
    stream_id: int
    payload: bytes

    @property
    def code(self) -> int:
        """The error code of a RST_STREAM or GOAWAY frame."""
        return int.from_bytes(self.payload[4:8] if self.type == GOAWAY else self.payload[:4], "big")

    def __str__(self) -> str:
        names = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING", "GOAWAY",
                 "WINDOW_UPDATE", "CONTINUATION"]  # fmt: skip
        name = names[self.type] if self.type < len(names) else f"type {self.type}"
        extra = f" code {self.code}" if self.type in (RST_STREAM, GOAWAY) else ""
        return f"{name}(flags={self.flags:#x}, stream={self.stream_id}, {len(self.payload)} bytes{extra})"


class RawH2:
    """One connection to the server under test."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout_s: float = 10.0, rcvbuf: int | None = None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout_s)
        self.sock.connect((host, port))
        self.timeout_s = timeout_s
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.buffer = bytearray()
        self.pos = 0
        self.server_settings: dict[int, int] = {}
        self.closed = False
        self.seen: list[Frame] = []

    def __enter__(self) -> RawH2:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def handshake(self, *pairs: tuple[int, int]) -> None:
        """Preface and SETTINGS (h2spec sends SETTINGS_INITIAL_WINDOW_SIZE 65535); wait for the server's SETTINGS
        (acknowledged) and its acknowledgement of ours."""
        self.send(PREFACE + settings(*(pairs or ((S_INITIAL_WINDOW_SIZE, 65535),))))
        local = remote = False
        while not (local and remote):
            item = self.read_frame()
            assert item is not None, "the server closed the connection during the handshake"
            if item.type == SETTINGS:
                if item.flags & ACK:
                    local = True
                else:
                    remote = True

    def encode(self, headers: list[tuple[str, str]]) -> bytes:
        return self.encoder.encode(headers)

    def request(self, path: str = "/", method: str = "GET", extra: Sequence[tuple[str, str]] = ()) -> bytes:
        """h2spec's common headers (:method, :scheme, :path, :authority), plus `extra`, encoded."""
        return self.encode([(":method", method), (":scheme", "http"), (":path", path),
                            (":authority", "127.0.0.1"), *extra])  # fmt: skip

    def grpc_request(self, method: str, extra: Sequence[tuple[str, str]] = ()) -> bytes:
        return self.request(f"{SERVICE}/{method}", "POST", [("content-type", "application/grpc"), ("te", "trailers"),
                                                             *extra])  # fmt: skip

    def headers(self, stream_id: int, block: bytes, end_stream: bool = True, end_headers: bool = True) -> None:
        flags = (END_STREAM if end_stream else 0) | (END_HEADERS if end_headers else 0)
        self.send(frame(HEADERS, flags, stream_id, block))

    def data(self, stream_id: int, payload: bytes, end_stream: bool = True) -> None:
        self.send(frame(DATA, END_STREAM if end_stream else 0, stream_id, payload))

    # ---- reading --------------------------------------------------------------------------------------------------
    def read_frame(self, timeout_s: float | None = None) -> Frame | None:
        """The next frame; None once the server has closed the connection. TimeoutError if none comes in time."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        buffer = self.buffer
        while len(buffer) - self.pos < 9 or len(buffer) - self.pos < 9 + int.from_bytes(
            buffer[self.pos : self.pos + 3], "big"
        ):
            if self.closed:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no frame within the time; seen so far: {[str(f) for f in self.seen[-20:]]}")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.closed = True
                return None
            if self.pos:
                del buffer[: self.pos]
                self.pos = 0
            buffer += chunk
        pos = self.pos
        length = int.from_bytes(buffer[pos : pos + 3], "big")
        item = Frame(buffer[pos + 3], buffer[pos + 4], int.from_bytes(buffer[pos + 5 : pos + 9], "big") & 0x7FFFFFFF,
                     bytes(buffer[pos + 9 : pos + 9 + length]))  # fmt: skip
        self.pos = pos + 9 + length
        self.seen.append(item)
        del self.seen[:-1000]
        if item.type == SETTINGS and not item.flags & ACK:
            for offset in range(0, len(item.payload), 6):
                key, value = struct.unpack_from(">HL", item.payload, offset)
                self.server_settings[key] = value
            try:
                self.send(frame(SETTINGS, ACK, 0))
            except OSError:
                pass
        return item

    def wait_for(self, test, what: str, timeout_s: float | None = None) -> Frame:  # noqa: ANN001
        while True:
            item = self.read_frame(timeout_s)
            assert item is not None, f"the connection closed before {what}; seen: {[str(f) for f in self.seen]}"
            if test(item):
                return item

    def expect_connection_error(self, *codes: int) -> Frame:
        """GOAWAY with one of `codes`, then the server closes the connection."""
        item = self.wait_for(lambda f: f.type == GOAWAY, f"GOAWAY {codes}")
        assert item.code in codes, f"GOAWAY with code {item.code}, expected one of {codes}"
        self.expect_closed()
        return item

    def expect_closed(self) -> None:
        while self.read_frame() is not None:
            pass

    def expect_stream_error(self, stream_id: int, *codes: int) -> Frame:
        """RST_STREAM on the stream with one of `codes` (h2spec also takes GOAWAY with one of them)."""
        item = self.wait_for(lambda f: f.type == GOAWAY or (f.type == RST_STREAM and f.stream_id == stream_id),
                             f"RST_STREAM {codes} on stream {stream_id}")  # fmt: skip
        assert item.code in codes, f"{item} with code {item.code}, expected one of {codes}"
        return item

    def expect_headers(self, stream_id: int) -> Frame:
        item = self.wait_for(lambda f: f.type in (HEADERS, RST_STREAM, GOAWAY) and f.stream_id in (0, stream_id),
                             f"HEADERS on stream {stream_id}")  # fmt: skip
        assert item.type == HEADERS, f"expected HEADERS on stream {stream_id}, got {item}"
        return item

    def expect_ping_ack(self, data: bytes = bytes(8)) -> None:
        item = self.wait_for(lambda f: f.type == PING and f.flags & ACK, "a PING acknowledgement")
        assert item.payload == data

    def expect_stream_end(self, stream_id: int) -> None:
        """The stream ends: a frame with END_STREAM, or RST_STREAM NO_ERROR."""
        self.wait_for(lambda f: f.stream_id == stream_id and ((f.type in (DATA, HEADERS) and f.flags & END_STREAM)
                                                              or (f.type == RST_STREAM and f.code == NO_ERROR)),
                      f"the end of stream {stream_id}")  # fmt: skip

    def answer(self, stream_id: int) -> tuple[dict[str, str], bytes, dict[str, str]]:
        """(response headers, DATA bytes, trailers) of a stream; a trailers-only answer gives ({}, b"", trailers)."""
        headers: dict[str, str] = {}
        data: list[bytes] = []
        while True:
            item = self.wait_for(lambda f: f.stream_id == stream_id or f.type == GOAWAY, f"stream {stream_id}")
            assert item.type != GOAWAY and item.type != RST_STREAM, f"{item} instead of an answer"
            if item.type == DATA:
                data.append(item.payload)
            elif item.type == HEADERS:
                decoded: dict[str, str] = dict(self.decoder.decode(item.payload))  # type: ignore[arg-type]
                if item.flags & END_STREAM:
                    return (headers, b"".join(data), decoded) if headers or data else ({}, b"", decoded)
                headers = decoded
