"""A unary call answered from a callback (`Method.begin`, the path of ModelInfer) or by a handler task (every other
unary method), and a server-streaming call, leave no cyclic garbage once its stream is over: the stream, its context and what answered it are freed
by reference counting, not by the cyclic collector (which, at high concurrency, ran every few hundred requests and
scanned every young object)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import hpack
import pytest

from pytriton.frontend.h2 import connection as h2
from pytriton.frontend.h2.method import Method


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.data = bytearray()

    def write(self, data: Any) -> None:
        self.data += data

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: Any = None, low: Any = None) -> None:
        pass

    def is_closing(self) -> bool:
        return False


class _Pending:
    """What `begin` returns: answered once its future is done."""

    def __init__(self, request: bytes):
        self.future = asyncio.get_running_loop().create_future()
        self.request = request

    def watch(self, callback: Any) -> None:
        self.future.add_done_callback(callback)

    def answer(self) -> bytes:
        return b"echo:" + self.request

    def cancel(self) -> None:
        self.future.cancel()


def _frame(ftype: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


@pytest.mark.parametrize("path", ["begin", "task", "stream"])
def test_answered_calls_leave_no_cyclic_garbage(path: str):
    async def main() -> tuple[int, list[str]]:
        begun: list[_Pending] = []

        def begin(request: bytes, context: Any) -> _Pending:
            begun.append(_Pending(request))
            return begun[-1]

        async def handler(request: bytes, context: Any) -> bytes:
            assert path == "task", "the handler ran"
            return b"echo:" + request

        async def streaming(request: bytes, context: Any) -> Any:
            yield b"echo:" + request
            yield b"again"

        if path == "stream":  # server streaming: the handler task ends with the call
            methods = {b"/t.S/Echo": Method(streaming, bytes, lambda response: [response], server_streaming=True)}
        else:
            methods = {b"/t.S/Echo": Method(handler, bytes, lambda response: [response],
                                            begin=begin if path == "begin" else None)}
        connection = h2.GrpcConnection(methods)
        transport = _Transport()
        connection.connection_made(transport)
        encoder = hpack.Encoder()
        headers = [(":method", "POST"), (":scheme", "http"), (":path", "/t.S/Echo"), (":authority", "x"),
                   ("content-type", "application/grpc"), ("te", "trailers")]

        def feed(data: bytes) -> None:
            view = memoryview(data)
            while view:
                buffer = connection.get_buffer(len(view))
                n = min(len(buffer), len(view))
                buffer[:n] = view[:n]
                connection.buffer_updated(n)
                view = view[n:]

        feed(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0, b""))
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for n in range(20):
                body = b"request %d" % n
                feed(_frame(1, 4, 2 * n + 1, encoder.encode(headers))
                     + _frame(0, 1, 2 * n + 1, b"\x00" + len(body).to_bytes(4, "big") + body))
                if path == "begin":
                    pending = begun.pop()
                    pending.future.set_result(None)
                    del pending
                for _ in range(3):
                    await asyncio.sleep(0)
            gc.collect()
            answered = bytes(transport.data).count(b"echo:request")
            return answered, sorted({type(o).__name__ for o in gc.garbage})
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
            connection.connection_lost(None)

    answered, garbage = asyncio.run(main())
    assert answered == 20
    assert not {"Stream", "Context", "_Answering", "Task"} & set(garbage), garbage
