"""A fake transport and client for driving `HttpConnection` the way asyncio's selector transport drives a buffered
protocol (get_buffer, recv into it, buffer_updated with the view still alive), with a fake clock (`tick(now)`)."""

from __future__ import annotations

import asyncio
from typing import Any

from pytriton.frontend.http1 import HttpLimits, HttpRequest, HttpResponse
from pytriton.frontend.http1.budget import BufferBudget
from pytriton.frontend.http1.connection import HttpConnection
from pytriton.frontend.http1.reader import SharedReadBuffer

__all__ = ["Client", "FakeTransport", "chunked", "get", "post", "run", "settle"]


class FakeTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.reading = True
        self.closed = False
        self.aborted = False
        self.pending = 0  # what get_write_buffer_size reports
        self.eof_capable = False  # what can_write_eof says (a TLS transport's says False)
        self.eof = False  # write_eof was called

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: Any) -> None:
        self.written += data

    def get_write_buffer_size(self) -> int:
        return self.pending

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def can_write_eof(self) -> bool:
        return self.eof_capable

    def write_eof(self) -> None:
        self.eof = True

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def abort(self) -> None:
        self.aborted = True


class Client:
    """One connection, its transport, and the requests its handler saw. Connections of one listener share a read
    buffer and a memory budget: pass `shared` (another Client) for that."""

    def __init__(self, limits: HttpLimits, handler: Any = None, shared: Client | None = None, begin: Any = None):
        self.requests: list[HttpRequest] = []
        read_buffer = shared.connection.read_buffer if shared is not None else SharedReadBuffer()
        budget = shared.connection.budget if shared is not None else None
        self.connection = HttpConnection(handler or self._answer, limits, read_buffer, set(), "", budget, begin)
        self.transport = FakeTransport()
        self.connection.connection_made(self.transport)  # type: ignore[arg-type]
        self.inbox = bytearray()  # what the client sent that the server has not read (the kernel's buffer)

    @property
    def budget(self) -> BufferBudget:
        return self.connection.budget

    async def _answer(self, request: HttpRequest) -> HttpResponse:
        self.requests.append(request)
        return HttpResponse(200, [str(len(request.body)).encode()])

    def send(self, data: bytes, step: int | None = None) -> None:
        """Deliver `data` as reads of at most `step` bytes (and at most what get_buffer offers)."""
        pos = 0
        while pos < len(data):
            assert self.transport.reading, "the connection stopped reading"
            view = self.connection.get_buffer(-1)
            n = min(len(view), len(data) - pos, step or len(data))
            view[:n] = data[pos : pos + n]
            self.connection.buffer_updated(n)  # the transport's view is still alive here, as in asyncio
            del view
            pos += n

    def read_once(self, step: int | None = None) -> int:
        """If the connection reads: one read of what `inbox` holds (at most `step` bytes and what get_buffer offers),
        as the event loop does when the socket is readable; returns the bytes read."""
        if not self.inbox or not self.transport.reading or self.transport.is_closing():
            return 0
        view = self.connection.get_buffer(-1)
        n = min(len(view), len(self.inbox), step or len(self.inbox))
        view[:n] = self.inbox[:n]
        del self.inbox[:n]
        self.connection.buffer_updated(n)
        del view
        return n

    def hang_up(self, exc: Exception | None = None) -> None:
        """The connection ends (EOF or reset): what the server does once it sees it."""
        self.transport.closed = True
        self.connection.connection_lost(exc)

    def hold(self, unsent: int) -> None:
        """The transport now holds `unsent` bytes it could not send (and says so, as asyncio's transports do)."""
        self.transport.pending = unsent
        if unsent:
            self.connection.pause_writing()
        else:
            self.connection.resume_writing()

    def answers(self) -> list[tuple[int, bytes]]:
        """(status, body) of everything written so far."""
        out, data = [], bytes(self.transport.written)
        while data:
            head, _, rest = data.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            if lines[0] == "HTTP/1.1 100 Continue":
                data = rest
                continue
            length = next(int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length"))
            out.append((int(lines[0].split()[1]), rest[:length]))
            data = rest[length:]
        return out

    def now(self, later: float = 0.0) -> float:
        return self.connection.loop.time() + later


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def run(test: Any) -> None:
    asyncio.run(test())


def get(path: str = "/", fields: int = 1, pad_to: int | None = None) -> bytes:
    head = f"GET {path} HTTP/1.1\r\nHost: x\r\n" + "".join(f"X-F{i}: v\r\n" for i in range(fields - 1))
    if pad_to is not None:
        head += "X-Pad: " + "p" * (pad_to - len(head) - len("X-Pad: \r\n\r\n")) + "\r\n"
    return (head + "\r\n").encode()


def post(body: bytes, extra: str = "") -> bytes:
    return f"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


def chunked(body: bytes) -> bytes:
    return (b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
