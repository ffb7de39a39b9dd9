"""An answer whose body is produced while it is sent (`HttpResponse.stream`): its head with `Transfer-Encoding:
chunked` instead of a Content-Length, each part of the body as one chunk, and the last (empty) chunk.

The connection (`HttpConnection._send_stream`) writes them: it takes the next part from the stream only once the
client has taken what was written before, down to `WRITE_HIGH` unsent bytes; a client that takes nothing for the body
timeout is dropped, and a dropped connection closes the stream (its producer hears of it: `aclose`)."""

from __future__ import annotations

from http import HTTPStatus

_REASONS = {s.value: s.phrase for s in HTTPStatus}

LAST_CHUNK = b"0\r\n\r\n"


def chunked_head(status: int, headers: list[tuple[str, str]], keep_alive: int, chunked: bool = True) -> bytes:
    """The status line and headers of an answer whose body follows in chunks (not `chunked`: a body that ends with the
    connection, for an HTTP/1.0 client)."""
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n", "Transfer-Encoding: chunked\r\n" if chunked else ""]
    for name, value in headers:
        lines.append(f"{name}: {value}\r\n")
    if not keep_alive:
        lines.append("Connection: close\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("latin-1")


def chunk(data: bytes) -> bytes:
    """`data` framed as one chunk (an empty part would end the body: the caller skips those)."""
    return b"%x\r\n%b\r\n" % (len(data), data)


__all__ = ["LAST_CHUNK", "chunk", "chunked_head"]
