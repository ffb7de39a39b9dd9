"""HTTP/2 framing for the gRPC transport: frame types, flags, settings and error codes (RFC 9113 sections 6, 7,
11), the errors the connection raises, frame builders, and the HPACK pieces (responses are encoded with literal
fields; request header blocks are decoded with the `hpack` package under a header-list size limit).
"""

from __future__ import annotations

import re
import struct

import grpc
import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

S_HEADER_TABLE_SIZE, S_ENABLE_PUSH, S_MAX_CONCURRENT_STREAMS, S_INITIAL_WINDOW_SIZE, S_MAX_FRAME_SIZE = 1, 2, 3, 4, 5
S_MAX_HEADER_LIST_SIZE = 6

NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED = 0, 1, 2, 3, 4, 5
FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, CONNECT_ERROR, ENHANCE_YOUR_CALM = 6, 7, 8, 9, 10, 11
ERROR_NAMES = (
    "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED",
    "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
)  # fmt: skip

MAX_WINDOW = 2**31 - 1  # the largest flow-control window (RFC 9113 6.9.1)
MIN_MAX_FRAME, MAX_MAX_FRAME = 1 << 14, (1 << 24) - 1  # the range of SETTINGS_MAX_FRAME_SIZE
MAX_GRPC_MESSAGE_TEXT = 8 * 1024  # longer grpc-message values are cut (clients limit the size of trailers)

FRAME = struct.Struct(">HBBBL")  # 24-bit length as 16 + 8 bits, type, flags, stream id
_U32 = struct.Struct(">L")
_TWO_U32 = struct.Struct(">LL")
# Some of the hpack package's messages quote the block as a memoryview's repr, an address in our heap: left out of
# what the client is told.
_MEMORY_REPR = re.compile(r":? (?:from )?<memory at 0x[0-9a-fA-F]+>")


class H2ConnectionError(Exception):
    """A connection error (RFC 9113 5.4.1): GOAWAY with `code`, then the connection is closed."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class H2StreamError(Exception):
    """A stream error (RFC 9113 5.4.2): RST_STREAM with `code` on `stream_id`; the connection goes on."""

    def __init__(self, stream_id: int, code: int, message: str):
        super().__init__(message)
        self.stream_id = stream_id
        self.code = code


def frame_header(length: int, ftype: int, flags: int, stream_id: int) -> bytes:
    return FRAME.pack(length >> 8, length & 0xFF, ftype, flags, stream_id)


def rst_stream_frame(stream_id: int, code: int) -> bytes:
    return frame_header(4, RST_STREAM, 0, stream_id) + _U32.pack(code)


def window_update_frame(stream_id: int, increment: int) -> bytes:
    return frame_header(4, WINDOW_UPDATE, 0, stream_id) + _U32.pack(increment)


def goaway_frame(last_stream_id: int, code: int, reason: str) -> bytes:
    debug = reason.encode("utf-8", "replace")[:256]
    return frame_header(8 + len(debug), GOAWAY, 0, 0) + _TWO_U32.pack(last_stream_id, code) + debug


def settings_frame(settings: dict[int, int]) -> bytes:
    payload = b"".join(struct.pack(">HL", key, value) for key, value in settings.items())
    return frame_header(len(payload), SETTINGS, 0, 0) + payload


# ---- HPACK, out: literal fields only (our responses never insert into the client's dynamic table) ----------------


def hpack_int(value: int, prefix_bits: int, flags: int = 0) -> bytes:
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


def literal(name: bytes, value: bytes) -> bytes:
    """A header field as an HPACK literal without indexing, new name, no Huffman coding."""
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


# ":status: 200" is entry 8 of HPACK's static table; "content-type" is entry 31 (literal, indexed name).
RESPONSE_HEADERS = (
    b"\x88" + b"\x0f\x10" + hpack_int(16, 7) + b"application/grpc"
    + literal(b"grpc-accept-encoding", b"identity,deflate,gzip")
)  # fmt: skip
RESPONSE_HEADERS_GZIP = RESPONSE_HEADERS + literal(b"grpc-encoding", b"gzip")  # messages may be gzip-compressed
TRAILERS_OK = literal(b"grpc-status", b"0")


def percent_encode(message: str) -> bytes:
    raw = message.encode("utf-8", "replace")[:MAX_GRPC_MESSAGE_TEXT]
    if all(0x20 <= b <= 0x7E and b != 0x25 for b in raw):
        return raw
    return b"".join(bytes((b,)) if 0x20 <= b <= 0x7E and b != 0x25 else b"%%%02X" % b for b in raw)


def status_block(code: grpc.StatusCode, message: str) -> bytes:
    block = literal(b"grpc-status", str(code.value[0]).encode())
    if message:
        block += literal(b"grpc-message", percent_encode(message))
    return block


# ---- HPACK, in ------------------------------------------------------------------------------------------------


class HeaderBlockDecoder:
    """Decodes request header blocks and measures them as RFC 9113 6.5.2 does (name + value + 32 per field).

    The caller bounds the compressed block before it is buffered; decoding stops with a connection error once
    the list passes `hard_limit` (HPACK state is then lost, as with any decoding error), which also bounds the
    decoding work (the `hpack` package takes a few microseconds per field). Below that the block is decoded in
    full and its size returned, for the caller to refuse a list over its soft limit with a stream error while
    the dynamic table stays in step with the client's. A block of one-byte references to table entries (a client
    repeating the same call) is looked up directly, ten times cheaper, and measured the same way; a reference
    becomes a tuple of the entry's own bytes objects, never a copy.
    """

    __slots__ = ("_decoder", "_table", "_hard_limit", "table_unchanged")

    def __init__(self, hard_limit: int) -> None:
        self.table_unchanged = True  # the last block only referred to table entries (no insertion, no resize)
        self._hard_limit = hard_limit
        self._decoder = hpack.Decoder(max_header_list_size=hard_limit)
        self._table = self._decoder.header_table

    def decode(self, block: bytes) -> tuple[list[tuple[bytes, bytes]], int]:
        """(fields, decoded size); H2ConnectionError for a block HPACK cannot decode (COMPRESSION_ERROR) or whose
        list is larger than the hard limit (ENHANCE_YOUR_CALM)."""
        try:
            headers: list[tuple[bytes, bytes]]
            if block and min(block) > 0x80 and max(block) < 0xFF:
                get = self._table.get_by_index
                headers = [get(b & 0x7F) for b in block]
                self.table_unchanged = True
            else:
                self.table_unchanged = False
                headers = self._decoder.decode(block, raw=True)  # type: ignore[assignment]  # bytes, with raw
        except hpack.OversizedHeaderListError:
            raise H2ConnectionError(ENHANCE_YOUR_CALM, f"header list larger than {self._hard_limit} bytes") from None
        except hpack.HPACKError as exc:
            raise H2ConnectionError(COMPRESSION_ERROR, f"bad header block: {_MEMORY_REPR.sub('', str(exc))}") from None
        size = 32 * len(headers)
        for name, value in headers:
            size += len(name) + len(value)
        if size > self._hard_limit:
            raise H2ConnectionError(ENHANCE_YOUR_CALM, f"header list larger than {self._hard_limit} bytes")
        return headers, size
