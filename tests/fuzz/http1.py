"""HTTP/1.1 heads and bodies: the bytes a client sends on one connection, read by `HttpConnection` (httptools under our
limits), driven by a fake transport as asyncio drives a buffered protocol (see tests/frontend/http1/_fake.py).

The connection's own error is an answer: 400, 413 or 431 (then it closes), never an exception out of `buffer_updated`
and never a logged error. Each input is read twice, once as one read and once in pieces of 1 to 256 bytes
(`harness.read_sizes`: a CRLF CRLF cut anywhere), and both must give the handler the same requests and the client the
same answers: how the reads fall must not change what a request is. The limits are small, so that inputs reach them;
memory must grow with the bytes sent, not with the sizes a head declares.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Iterator

from pytriton.frontend.http1 import HttpLimits, HttpRequest, HttpResponse
from pytriton.frontend.http1.connection import HttpConnection
from pytriton.frontend.http1.reader import SharedReadBuffer
from tests.frontend.http1._fake import FakeTransport
from tests.fuzz.harness import Finding, Harness, read_sizes

LIMITS = HttpLimits(max_input_bytes=1 << 20, max_header_bytes=2048, max_header_count=16, max_pipelined=4,
                    max_buffered_bytes=256 << 10)
REFUSALS = {400, 413, 431}


def answers(written: bytes) -> list[tuple[int, bytes]]:
    """(status, body) of each answer in `written` (an answer to HEAD has no body: the next answer follows its head)."""
    out = []
    data = written
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            raise Finding("answer cut short", repr(written[-200:]))
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or parts[0] != "HTTP/1.1" or not parts[1].isdigit():
            raise Finding("malformed status line", repr(lines[0]))
        status = int(parts[1])
        if status == 100:
            data = rest
            continue
        lengths = [line.split(":", 1)[1].strip() for line in lines[1:] if line.lower().startswith("content-length:")]
        if len(lengths) != 1 or not lengths[0].isdigit():
            raise Finding("answer without one Content-Length", repr(head))
        length = int(lengths[0])
        if rest.startswith(b"HTTP/1.1 ") or not rest:  # (HEAD)
            out.append((status, b""))
            data = rest
            continue
        if len(rest) < length:
            raise Finding("answer body shorter than its Content-Length", repr(head))
        out.append((status, rest[:length]))
        data = rest[length:]
    return out


async def _settle(connection: HttpConnection) -> None:
    for _ in range(100):
        await asyncio.sleep(0)
        if connection.task is None and not connection.queue:
            return


async def session(data: bytes, steps: Iterator[int], read_buffer: SharedReadBuffer) -> tuple[list[Any], list[Any], int]:
    """What the handler saw, what the client got, and how many bytes the connection took."""
    seen: list[Any] = []
    problems: list[str] = []

    async def handler(request: HttpRequest) -> HttpResponse:
        seen.append((request.method, request.path, request.query, sorted(request.headers.items()),
                     bytes(request.body)))
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and "transfer-encoding" not in request.headers:
            if int(length) != len(request.body):
                problems.append(f"Content-Length {length}, body of {len(request.body)} bytes")
        return HttpResponse(200, [b"%d" % len(request.body)])

    connection = HttpConnection(handler, LIMITS, read_buffer, set(), "")
    transport = FakeTransport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    pos = 0
    try:
        while pos < len(data) and not transport.is_closing():
            if not transport.reading:
                await _settle(connection)
                if not transport.reading:
                    break  # (refused: the connection reads no more)
                continue
            view = connection.get_buffer(-1)
            n = min(len(view), len(data) - pos, next(steps))
            view[:n] = data[pos : pos + n]
            connection.buffer_updated(n)
            del view
            pos += n
        await _settle(connection)
    finally:
        transport.closed = True
        connection.connection_lost(None)
        await _settle(connection)
    if problems:
        raise Finding("body length differs from Content-Length", problems[0])
    return seen, answers(bytes(transport.written)), pos


class Http1Harness(Harness):
    name = "http1"
    max_len = 8192

    def setup(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.time = lambda: 1000.0  # type: ignore[method-assign]  # deadlines are set, never reached
        self.read_buffer = SharedReadBuffer()

    def close(self) -> None:
        self.loop.close()

    def one_input(self, data: bytes) -> None:
        whole = self.loop.run_until_complete(session(data, itertools.repeat(len(data) or 1), self.read_buffer))
        cut = self.loop.run_until_complete(session(data, read_sizes(data), self.read_buffer))
        for status, body in whole[1]:
            if status != 200 and status not in REFUSALS:
                raise Finding(f"answer {status}", body.decode("utf-8", "replace"))
        if whole[0] != cut[0]:
            raise Finding("requests depend on how the reads fall",
                          f"one read: {whole[0]!r}\nin pieces: {cut[0]!r}")
        if [s for s, _ in whole[1]] != [s for s, _ in cut[1]]:
            raise Finding("answers depend on how the reads fall",
                          f"one read: {whole[1]!r}\nin pieces: {cut[1]!r}")
