"""The HTTP/2 transport alone, in a thread's event loop, serving small test methods: for tests of its limits and
of the release of response buffers, where a whole server (workers, servicer) would only blur what is measured."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any, AsyncIterator, Callable

import grpc

from pytriton.frontend.h2 import connection as h2
from tests.frontend.grpc.raw_h2 import RawH2, grpc_message

PATTERN = 0x5A  # the bytes of a reply; a released reply's buffer is overwritten, as a reused worker segment would be


class Ledger:
    """Replies made and released (each must be released exactly once), calls started and cancelled."""

    def __init__(self) -> None:
        self.made = 0
        self.released: list[int] = []
        self.started = 0
        self.cancelled = 0
        self.gate = asyncio.Event()  # /t.S/Gate takes its requests past the first once this is set
        self.together = 1  # /t.S/Together answers once this many of its calls wait (all in one loop turn)
        self.waiting: list[asyncio.Future] = []

    def double_releases(self) -> list[int]:
        return sorted({r for r in self.released if self.released.count(r) > 1})


class Reply:
    """A response owning a buffer (like a worker's output segment) that goes back through `release`."""

    def __init__(self, ledger: Ledger, size: int):
        ledger.made += 1
        self.number = ledger.made
        self.ledger = ledger
        self.buffer = bytearray([PATTERN]) * size

    def release(self) -> None:
        self.ledger.released.append(self.number)
        self.buffer[:] = bytes(len(self.buffer))  # reused: whoever still reads it gets zeros


def _serialize(response: Any) -> list[Any]:
    if isinstance(response, Reply):
        return [memoryview(response.buffer)]
    return [bytes(response)]


def _on_sent(response: Any) -> Callable[[], None] | None:
    return response.release if isinstance(response, Reply) else None


def _broken(response: Any) -> list[Any]:
    raise ValueError("cannot serialise this")


def transport_methods(ledger: Ledger) -> dict[bytes, h2.Method]:
    """/t.S/Echo (the request back), /t.S/Hold (never answers; counts cancellations), /t.S/Big (a Reply of the
    size the request names, after the delay it names: b"<size>" or b"<size>:<seconds>"), /t.S/Stream (Replies of
    the size named, one after another, until cancelled); /t.S/Refused returns a Reply but ends the call with
    set_code(NOT_FOUND); /t.S/Broken returns a Reply its serialiser fails on; /t.S/Gate (bidirectional) takes its
    first request, then the others once `ledger.gate` is set, and answers the bytes it took; /t.S/Together echoes
    its request once `ledger.together` calls wait, all of them woken at once (as one batch's completion does)."""

    async def echo(request: bytes, context: h2.Context) -> bytes:
        return request

    async def hold(request: bytes, context: h2.Context) -> bytes:
        ledger.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            ledger.cancelled += 1
            raise
        return b""

    async def big(request: bytes, context: h2.Context) -> Reply:
        size, _, delay = bytes(request).decode().partition(":")
        ledger.started += 1
        if delay:
            await asyncio.sleep(float(delay))
        return Reply(ledger, int(size))

    async def stream(request: bytes, context: h2.Context) -> AsyncIterator[Reply]:
        size = int(bytes(request))
        ledger.started += 1
        while True:
            yield Reply(ledger, size)
            await asyncio.sleep(0)

    async def gate(requests: AsyncIterator[bytes], context: h2.Context) -> AsyncIterator[bytes]:
        total = len(await anext(requests))
        await ledger.gate.wait()
        async for request in requests:
            total += len(request)
        yield str(total).encode()

    async def together(request: bytes, context: h2.Context) -> bytes:
        waiter = asyncio.get_running_loop().create_future()
        ledger.waiting.append(waiter)
        if len(ledger.waiting) >= ledger.together:
            waiting, ledger.waiting = ledger.waiting, []
            for each in waiting:
                each.set_result(None)
        await waiter
        return request

    async def refused(request: bytes, context: h2.Context) -> Reply:
        context.set_code(grpc.StatusCode.NOT_FOUND)
        context.set_details("chose not to answer")
        return Reply(ledger, 1000)

    identity = bytes
    return {
        b"/t.S/Refused": h2.Method(refused, identity, _serialize, on_sent=_on_sent),
        b"/t.S/Broken": h2.Method(big, identity, _broken, on_sent=_on_sent),
        b"/t.S/Echo": h2.Method(echo, identity, _serialize),
        b"/t.S/Together": h2.Method(together, identity, _serialize),
        b"/t.S/Hold": h2.Method(hold, identity, _serialize),
        b"/t.S/Big": h2.Method(big, identity, _serialize, on_sent=_on_sent),
        b"/t.S/Stream": h2.Method(stream, identity, _serialize, server_streaming=True, on_sent=_on_sent),
        b"/t.S/Gate": h2.Method(gate, identity, _serialize, client_streaming=True, server_streaming=True),
    }


class InProcessServer:
    """`with InProcessServer(limits) as server:` the transport on 127.0.0.1:`server.port` with `transport_methods`."""

    def __init__(self, limits: h2.H2Limits | None = None):
        self.limits = limits
        self.ledger = Ledger()
        self.connections: set[h2.GrpcConnection] = set()
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    def __enter__(self) -> InProcessServer:
        self._thread.start()
        methods = transport_methods(self.ledger)

        async def start() -> None:
            self._server = await self.loop.create_server(
                lambda: h2.GrpcConnection(methods, self.connections, self.limits), "127.0.0.1", 0
            )
            self.port = self._server.sockets[0].getsockname()[1]

        self.run(start())
        return self

    def run(self, what: Any, timeout_s: float = 30.0) -> Any:
        """Run a coroutine, or call a function, in the server's loop; its result."""
        if asyncio.iscoroutine(what):
            return asyncio.run_coroutine_threadsafe(what, self.loop).result(timeout_s)

        async def call() -> Any:
            return what()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout_s)

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for connection in list(self.connections):
                if connection.transport is not None:
                    connection.transport.abort()
            await asyncio.sleep(0.05)

        try:
            self.run(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()


# ---- for tests with raw frames (tests/frontend/grpc/raw_h2.py) ---------------------------------------------------

GRPC_HEADERS = [("content-type", "application/grpc"), ("te", "trailers")]


def request(raw: RawH2, path: str, extra: Sequence[tuple[str, str]] = ()) -> bytes:
    """A gRPC call's HEADERS block for `path`."""
    return raw.request(path, "POST", [*GRPC_HEADERS, *extra])


def echo_works(raw: RawH2, stream_id: int) -> None:
    """The connection still serves calls."""
    raw.headers(stream_id, request(raw, "/t.S/Echo"), end_stream=False)
    raw.data(stream_id, grpc_message(b"still here"))
    _, data, trailers = raw.answer(stream_id)
    assert trailers["grpc-status"] == "0" and data[5:] == b"still here"


def wait_until(server: InProcessServer, test, what: str, timeout_s: float = 20.0) -> None:  # noqa: ANN001
    """Until `test()`, run in the server's loop, holds."""
    deadline = time.monotonic() + timeout_s
    while not server.run(test):
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.02)


def connection(server: InProcessServer):  # noqa: ANN201
    """The server's one connection."""
    (conn,) = server.connections
    return conn
