"""Requests and responses of the HTTP/1.1 server, the plain `{"error": msg}` answer, and a response's bytes on the
wire (Content-Length framing; large parts sent from their own buffers)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from http import HTTPStatus
from typing import Any, Protocol

import orjson

# A body part of at least this many bytes is handed to the transport on its own, never joined with the rest.
LARGE_PART = 64 * 1024

_REASONS = {s.value: s.phrase for s in HTTPStatus}
# Heads of answers (status line and headers) by status, keep-alive, length and headers; bounded: past `HEADS_KEPT`
# the cache starts again empty; answers with more header fields or longer heads are built each time.
HEADS_KEPT = 256
HEADS_KEPT_FIELDS = 4
HEADS_KEPT_BYTES = 512
_heads: dict[tuple[Any, ...], bytes] = {}
_JSON = ("Content-Type", "application/json")


class HttpRequest:
    __slots__ = ("body", "headers", "http10", "method", "path", "peer", "query", "route")

    def __init__(
        self, method: str, path: str, query: str, headers: dict[str, str], body: Any, peer: str | None = None
    ):
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers  # lower-case names; repeated fields joined with ", "
        self.body = body  # bytes, or a bytearray for a large body received straight into its own buffer
        self.peer = peer  # client address (host), "" for a Unix socket
        self.route: Any = None  # what the application made of the path, kept for its handler (matched once)
        self.http10 = False  # an HTTP/1.0 request: a streamed answer to it is not chunked (it cannot read chunks)


class HttpResponse:
    """Status, headers and body parts (any buffers); `on_sent` runs once the parts have been handed over. With
    `stream`, the body is what the stream yields instead, sent in chunks as it comes (chunked.py)."""

    __slots__ = ("close", "headers", "on_sent", "parts", "status", "stream")

    def __init__(
        self,
        status: int = 200,
        parts: list[Any] | None = None,
        headers: list[tuple[str, str]] | None = None,
        on_sent: Callable[[], None] | None = None,
        stream: AsyncGenerator[bytes, None] | None = None,
    ):
        self.status = status
        self.parts = parts or []
        self.headers = headers or []
        self.on_sent = on_sent
        self.close = False
        self.stream = stream


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


class PendingAnswer(Protocol):
    """An answer a `Begin` started: once `future` is done, `answer()` is the response (an error answer too);
    `watch(callback)` has `callback(future)` called once it is (not after `cancel()`); `cancel()`: the connection
    ended first, what the request holds goes back."""

    future: asyncio.Future[Any]

    def watch(self, callback: Callable[[asyncio.Future[Any]], None]) -> None: ...

    def answer(self) -> HttpResponse: ...

    def cancel(self) -> None: ...


# Answers a request without a coroutine where it can: the response at once, a `PendingAnswer`, or None (the handler
# answers it).
Begin = Callable[[HttpRequest], "HttpResponse | PendingAnswer | None"]


def error_response(status: int, message: str) -> HttpResponse:
    """Triton's error answer: `{"error": message}` as JSON."""
    return HttpResponse(status, [orjson.dumps({"error": message})], [_JSON])


# What `keep_alive` says of a connection after an answer: False (it closes: `Connection: close`), True (HTTP/1.1, which
# persists unless told otherwise), or KEEP_ALIVE_10: an HTTP/1.0 client that asked to keep it (`Connection:
# keep-alive`), which persists only when the answer says so too.
KEEP_ALIVE_10 = 2


def _head(status: int, headers: list[tuple[str, str]], keep_alive: int, length: int) -> bytes:
    """The status line and headers; kept for the answers a server repeats (same status, headers and length)."""
    key = (status, keep_alive, length, *headers) if len(headers) <= HEADS_KEPT_FIELDS else None
    if key is not None:
        try:
            head = _heads.get(key)
        except TypeError:  # (a header given as something unhashable: built each time)
            key = head = None
        if head is not None:
            return head
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nContent-Length: {length}\r\n"]
    for name, value in headers:
        lines.append(f"{name}: {value}\r\n")
    if not keep_alive:
        lines.append("Connection: close\r\n")
    elif keep_alive == KEEP_ALIVE_10:
        lines.append("Connection: keep-alive\r\n")
    lines.append("\r\n")
    head = "".join(lines).encode("latin-1")
    if key is not None and len(head) <= HEADS_KEPT_BYTES:
        if len(_heads) >= HEADS_KEPT:
            _heads.clear()
        _heads[key] = head
    return head


def write_response(transport: asyncio.WriteTransport, response: HttpResponse, keep_alive: int, head: bool) -> bool:
    """Write `response` (for a HEAD request only its status line and headers: a body would be read as the start of
    the next response); True when the transport may still refer to a part's buffer instead of a copy."""
    length = 0
    for part in response.parts:
        length += part.nbytes if isinstance(part, memoryview) else len(part)
    small: list[Any] = [_head(response.status, response.headers, keep_alive, length)]
    by_reference = False
    for part in [] if head else response.parts:
        size = part.nbytes if isinstance(part, memoryview) else len(part)
        if size < LARGE_PART:
            small.append(part)
            continue
        # A large tensor goes out on its own: the transport sends it straight from the buffer (writelines would
        # join everything first).
        transport.write(b"".join(small))
        small = []
        transport.write(part)
        by_reference = True
    if len(small) == 1:
        transport.write(small[0])
        by_reference |= not isinstance(small[0], bytes)
    elif small:
        transport.write(b"".join(small))
    return by_reference
