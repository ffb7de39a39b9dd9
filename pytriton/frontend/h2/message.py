"""gRPC messages apart from HTTP/2: the abort that ends a call with a status, request decompression (bounded) and
response compression (gzip, in a thread when large).
"""

from __future__ import annotations

import zlib
from typing import Any, Iterator

import grpc

GZIP_THREAD_MIN = 64 * 1024  # a response at least this large is compressed in a thread (zlib lets go of the GIL)


class RpcAbort(Exception):
    """Raised by `Context.abort`: ends the call with this status."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code = code
        self.details = details


DECOMPRESS_CHUNK = 1 << 20


def message_size(parts: list[Any]) -> int:
    return sum(part.nbytes if isinstance(part, memoryview) else len(part) for part in parts)


def gzip_message(parts: list[Any], level: int, size: int) -> bytes | None:
    """A response message of `size` bytes (its buffers) gzip-compressed at zlib `level`; None when that would not
    make it smaller (it then goes out uncompressed, as grpc core sends it)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    out = [compressor.compress(part) for part in parts]
    out.append(compressor.flush())
    data = b"".join(out)
    return data if len(data) < size else None


def decompress(message: Any, encoding: str | None, limit: int) -> bytearray:
    """A gzip/deflate request message, inflated to at most `limit` bytes (RpcAbort past that or when broken).

    Two passes: the first inflates a chunk at a time only to measure (and refuse past the limit) without keeping
    anything; the second inflates into a buffer of exactly that size. Memory follows what the message really
    inflates to: no growing buffer copied on the way, no zlib output built at twice the limit."""
    if encoding not in ("gzip", "deflate"):
        raise RpcAbort(grpc.StatusCode.INTERNAL, "compressed message without grpc-encoding")
    wbits = 31 if encoding == "gzip" else 15
    size = 0
    for chunk in _inflate(message, wbits):
        size += len(chunk)
        if size > limit:
            raise RpcAbort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                           f"Received message larger than max (more than {limit} bytes once decompressed)")
    out = bytearray(size)
    position = 0
    for chunk in _inflate(message, wbits):
        out[position:position + len(chunk)] = chunk
        position += len(chunk)
    return out


def _inflate(message: Any, wbits: int) -> Iterator[bytes]:
    inflater = zlib.decompressobj(wbits)
    pending: Any = message
    try:
        while not inflater.eof:
            chunk = inflater.decompress(pending, DECOMPRESS_CHUNK)
            pending = inflater.unconsumed_tail
            if not chunk and not pending:
                break
            yield chunk
    except zlib.error as exc:
        raise RpcAbort(grpc.StatusCode.INTERNAL, f"cannot decompress the request: {exc}") from None
    if not inflater.eof:
        raise RpcAbort(grpc.StatusCode.INTERNAL, "cannot decompress the request: truncated data")
