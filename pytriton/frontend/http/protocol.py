"""A small HTTP/1.1 server on asyncio + httptools (the parser uvicorn uses), without a framework.

Keep-alive, pipelining (responses leave in request order), chunked request bodies (decoded by the
parser), a body-size limit, and Content-Length responses. One handler coroutine answers every request.

Reading is buffered (`asyncio.BufferedProtocol`): the head of a request is parsed from a per-connection
buffer, and a large Content-Length body (a tensor) is received by the socket straight into the request's
own buffer, so its bytes are copied once on the way in instead of three times (read, parser callback, join).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import sys
from http import HTTPStatus
from typing import Any, Awaitable, Callable

import httptools

logger = logging.getLogger("pytriton.frontend")

MAX_PIPELINED = 32
LARGE_PART = 64 * 1024
READ_BUFFER = 64 * 1024
# A body with a Content-Length of at least this many bytes is received straight into its own buffer.
DIRECT_BODY_MIN = 64 * 1024


class HttpRequest:
    __slots__ = ("method", "path", "query", "headers", "body", "peer")

    def __init__(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes, peer: str | None = None
    ):
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers  # lower-case names
        self.body = body
        self.peer = peer  # client address (host), "" for a Unix socket


class HttpResponse:
    """Status, headers and body parts (any buffers); `on_sent` runs once the parts have been handed over."""

    __slots__ = ("status", "headers", "parts", "on_sent", "close")

    def __init__(
        self,
        status: int = 200,
        parts: list[Any] | None = None,
        headers: list[tuple[str, str]] | None = None,
        on_sent: Callable[[], None] | None = None,
    ):
        self.status = status
        self.parts = parts or []
        self.headers = headers or []
        self.on_sent = on_sent
        self.close = False


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]
ErrorResponder = Callable[[int, str], HttpResponse]

_REASONS = {s.value: s.phrase for s in HTTPStatus}


def _plain_error(status: int, message: str) -> HttpResponse:
    return HttpResponse(status, [json.dumps({"error": message}).encode()], [("Content-Type", "application/json")])


class HttpProtocol(asyncio.BufferedProtocol):
    """One client connection."""

    def __init__(
        self, handler: Handler, max_body_bytes: int, on_error: ErrorResponder = _plain_error, too_large_hint: str = ""
    ):
        self.handler = handler
        self.max_body_bytes = max_body_bytes
        self.too_large_hint = too_large_hint  # appended to the 413 message, e.g. which option raises the limit
        self.on_error = on_error
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.queue: collections.deque[tuple[HttpRequest | HttpResponse, bool]] = collections.deque()
        self.task: asyncio.Task | None = None
        self.paused = False
        self.peer: str | None = None
        self.connections: set[HttpProtocol] | None = None  # the server's registry of open connections
        self._read_buffer = memoryview(bytearray(READ_BUFFER))
        self._spare_body: bytearray | None = None  # the last large body's buffer, reused once nothing holds it
        self._after_drain: list[Callable[[], None]] = []  # on_sent of responses whose buffers the transport holds
        self._reset()

    def _reset(self) -> None:
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._size = 0
        self._too_large = False
        # A large Content-Length body: its buffer, how much of it came with the head (through the parser),
        # and, once the head is parsed, the part the socket still has to fill.
        self._direct_body: bytearray | None = None
        self._direct_size = 0
        self._direct_rest: memoryview | None = None
        self._direct_keep_alive = True
        self._direct_method = b""

    # ---- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peername = transport.get_extra_info("peername")
        self.peer = peername[0] if isinstance(peername, tuple) else ("" if peername is not None else None)
        if self.connections is not None:
            self.connections.add(self)
        # pause_writing/resume_writing then tell when the transport holds data and when it has sent it all.
        transport.set_write_buffer_limits(high=0)  # type: ignore[attr-defined]

    def pause_writing(self) -> None:
        """The transport holds unsent data (write buffer limits are 0: this comes with the first byte)."""

    def resume_writing(self) -> None:
        """The transport's buffer is empty: the tensors it was sending from may go back to their owners."""
        self._run_after_drain()

    def _run_after_drain(self) -> None:
        callbacks, self._after_drain = self._after_drain, []
        for callback in callbacks:
            callback()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.connections is not None:
            self.connections.discard(self)
        if self.task is not None and not self.task.done():
            self.task.cancel()
        for item, _ in self.queue:
            if isinstance(item, HttpResponse) and item.on_sent:
                item.on_sent()
        self.queue.clear()
        self._run_after_drain()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._direct_rest if self._direct_rest is not None else self._read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        rest = self._direct_rest
        if rest is not None:
            if nbytes < len(rest):
                self._direct_rest = rest[nbytes:]
            else:
                self._direct_body_complete()
            return
        self.data_received(self._read_buffer[:nbytes])

    def data_received(self, data: Any) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._enqueue(self.on_error(400, "protocol upgrade is not supported"), keep_alive=False)
            return
        except httptools.HttpParserError as exc:
            self._enqueue(self.on_error(400, f"malformed HTTP request: {exc}"), keep_alive=False)
            if self.transport is not None:
                self.transport.pause_reading()
            return
        if self._direct_body is not None:
            # The head of a large request has been parsed and its body is still on the way: the socket
            # writes the rest of it straight into the request's buffer (the parser sees no more of it).
            self._direct_rest = memoryview(self._direct_body)[self._direct_size :]

    def _direct_body_complete(self) -> None:
        body, self._direct_body, self._direct_rest = self._direct_body, None, None
        # The parser still waits for the body it did not see: a fresh one reads the next request.
        self.parser = httptools.HttpRequestParser(self)
        self._complete(body, self._direct_keep_alive, self._direct_method)

    # ---- httptools callbacks -----------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._reset()

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        previous = self._headers.get(key)
        self._headers[key] = text if previous is None else f"{previous}, {text}"

    def on_headers_complete(self) -> None:
        length = self._headers.get("content-length")
        if length is not None and length.isdigit():
            size = int(length)
            if size > self.max_body_bytes:
                self._too_large = True
            elif size >= DIRECT_BODY_MIN and "transfer-encoding" not in self._headers:
                self._direct_body = self._body_buffer(size)
                self._direct_keep_alive = self.parser.should_keep_alive()
                self._direct_method = self.parser.get_method()
        # `Expect: 100-continue` (curl sends it for large bodies): say "go on" instead of letting the client wait
        # for its timeout (1 s in curl). Only when nothing is ahead of this request, so answers stay in order.
        if (
            self._headers.get("expect", "").lower() == "100-continue"
            and not self._too_large
            and not self.queue
            and self.task is None
            and self.transport is not None
        ):
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _body_buffer(self, size: int) -> bytearray:
        """A buffer for a large body: the previous one when it has the same size and no request, tensor view or
        message refers to it any more (clients send same-sized tensors over and over: a warm buffer, and no
        1 MiB allocation and zero-fill per request), else a new one."""
        spare = self._spare_body
        if spare is not None and len(spare) == size and sys.getrefcount(spare) == 3:  # attribute, local, argument
            return spare
        self._spare_body = buffer = bytearray(size)
        return buffer

    def on_body(self, body: bytes) -> None:
        if self._too_large:
            return
        if self._direct_body is not None:  # the part of a large body that came with its head
            end = self._direct_size + len(body)
            self._direct_body[self._direct_size : end] = body
            self._direct_size = end
            return
        self._size += len(body)
        if self._size > self.max_body_bytes:
            self._too_large = True
            self._body.clear()
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        keep_alive = self.parser.should_keep_alive()
        if self._too_large:
            size = self._headers.get("content-length") or f"more than {self.max_body_bytes}"  # chunked: unknown
            self._enqueue(
                self.on_error(
                    413,
                    f"request size of {size} bytes exceeds the maximum allowed input size of "
                    f"{self.max_body_bytes} bytes.{self.too_large_hint}",
                ),
                keep_alive=False,
            )
            return
        if self._direct_body is not None:  # the whole large body came with its head
            body: Any = self._direct_body
            self._direct_body = None
        else:
            body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._complete(body, keep_alive, self.parser.get_method())

    def _complete(self, body: Any, keep_alive: bool, method: bytes) -> None:
        url = httptools.parse_url(self._url)
        request = HttpRequest(
            method.decode("ascii"),
            url.path.decode("utf-8", "replace"),
            url.query.decode("utf-8", "replace") if url.query else "",
            self._headers,
            body,
            self.peer,
        )
        self._enqueue(request, keep_alive)

    # ---- request pipeline --------------------------------------------------------------------
    def _enqueue(self, item: HttpRequest | HttpResponse, keep_alive: bool) -> None:
        self.queue.append((item, keep_alive))
        if len(self.queue) > MAX_PIPELINED and self.transport is not None and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        if self.task is None:
            self.task = self.loop.create_task(self._run())

    async def _run(self) -> None:
        try:
            while self.queue and self.transport is not None:
                item, keep_alive = self.queue.popleft()
                if isinstance(item, HttpResponse):
                    response = item
                else:
                    try:
                        response = await self.handler(item)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # noqa: BLE001 - a handler bug must not kill the connection
                        logger.exception("HTTP handler failed for %s %s", item.method, item.path)
                        response = self.on_error(500, f"internal error: {exc}")
                head = isinstance(item, HttpRequest) and item.method == "HEAD"
                self._write(response, keep_alive and not response.close, head)
                if not keep_alive or response.close:
                    if self.transport is not None:
                        self.transport.close()
                    return
                if self.paused and len(self.queue) <= MAX_PIPELINED // 2 and self.transport is not None:
                    self.paused = False
                    self.transport.resume_reading()
        finally:
            self.task = None

    def _write(self, response: HttpResponse, keep_alive: bool, head: bool = False) -> None:
        """Send `response`; for a HEAD request only its status line and headers (a body would be read as the
        start of the next response on a keep-alive connection)."""
        transport = self.transport
        by_reference = False
        try:
            if transport is None:
                return
            length = 0
            for part in response.parts:
                length += part.nbytes if isinstance(part, memoryview) else len(part)
            reason = _REASONS.get(response.status, "")
            lines = [f"HTTP/1.1 {response.status} {reason}\r\nContent-Length: {length}\r\n"]
            for name, value in response.headers:
                lines.append(f"{name}: {value}\r\n")
            if not keep_alive:
                lines.append("Connection: close\r\n")
            lines.append("\r\n")
            small: list[Any] = [("".join(lines)).encode("latin-1")]
            for part in [] if head else response.parts:
                size = part.nbytes if isinstance(part, memoryview) else len(part)
                if size < LARGE_PART:
                    small.append(part)
                    continue
                # A large tensor goes out on its own: the transport sends it straight from the buffer (writelines
                # would join everything first).
                transport.write(b"".join(small))
                small = []
                transport.write(part)
                by_reference = True
            if len(small) == 1:
                transport.write(small[0])
                by_reference |= not isinstance(small[0], bytes)
            elif small:
                transport.write(b"".join(small))
        finally:
            if response.on_sent is not None:
                # What the socket did not take at once stays in the transport's buffer: Python 3.11 copies it,
                # 3.12 keeps a view of the tensor's buffer, so its owner waits until the buffer is empty.
                if by_reference and transport is not None and transport.get_write_buffer_size() > 0:
                    self._after_drain.append(response.on_sent)
                else:
                    response.on_sent()
