"""`HttpListener` on a real loopback socket, in this process: its tick holds connections to their deadlines, its
connections share one read buffer, and stop closes them all."""

from __future__ import annotations

import asyncio
import time
import zlib

import pytest

from pytriton.frontend.http1 import HttpLimits, HttpListener, HttpRequest, HttpResponse


async def _echo(request: HttpRequest) -> HttpResponse:
    return HttpResponse(200, [request.path.encode(), bytes(request.body)])


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return int(head.split()[1]), await reader.readexactly(length)


def test_connections_share_the_read_buffer_and_idle_ones_are_closed():
    async def test() -> None:
        listener = HttpListener(_echo, "127.0.0.1", 0, "test", HttpLimits(idle_timeout_s=2))
        port = await listener.start()
        streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(20)]
        try:
            for i, (_reader, writer) in enumerate(streams):  # interleaved: one buffer, no mix-up
                writer.write(f"POST /c{i} HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n".encode())
            for i, (_reader, writer) in enumerate(streams):
                writer.write(f"{i:03d}".encode())
            for i, (reader, _writer) in enumerate(streams):
                assert await _answer(reader) == (200, f"/c{i}{i:03d}".encode())
            assert listener.connection_count == 20
            for reader, _writer in streams:
                assert await asyncio.wait_for(reader.read(), 10) == b""  # closed when idle, without an answer
        finally:
            for _reader, writer in streams:
                writer.close()
                await writer.wait_closed()
        deadline = time.monotonic() + 30
        while listener.connection_count and time.monotonic() < deadline:  # the listener hears of the closes
            await asyncio.sleep(0.005)
        assert listener.connection_count == 0
        await listener.stop()

    asyncio.run(test())


def test_stop_closes_open_connections():
    async def test() -> None:
        listener = HttpListener(_echo, "127.0.0.1", 0, "test")
        port = await listener.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
        assert await _answer(reader) == (200, b"/x")
        await listener.stop()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        await writer.wait_closed()

    asyncio.run(test())


def test_connections_share_one_memory_budget():
    """40 clients upload 100 KiB at once through a 256 KiB budget: some stall until others' handlers are done, all
    are answered, and what bodies held goes back to 0 when the connections close."""
    count, size = 40, 100 * 1024

    async def crc(request: HttpRequest) -> HttpResponse:
        await asyncio.sleep(0.01)  # the body stays charged meanwhile
        return HttpResponse(200, [str(zlib.crc32(request.body)).encode()])

    async def client(port: int, i: int) -> tuple[int, bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = bytes([i]) * size
        writer.write(f"POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n".encode() + body)
        answer = await asyncio.wait_for(_answer(reader), 30)
        writer.close()
        await writer.wait_closed()
        return answer

    async def test() -> None:
        listener = HttpListener(crc, "127.0.0.1", 0, "test", HttpLimits(max_buffered_bytes=256 * 1024))
        port = await listener.start()
        answers = await asyncio.gather(*(client(port, i) for i in range(count)))
        assert answers == [(200, str(zlib.crc32(bytes([i]) * size)).encode()) for i in range(count)]
        budget = listener.budget
        assert budget.waits > 0  # the budget was spent: some waited
        assert budget.peak <= 256 * 1024 + size + count * 4096
        for _ in range(100):
            if listener.connection_count == 0:
                break
            await asyncio.sleep(0.05)
        assert listener.buffered_bytes == 0 and budget.waiting == 0
        await listener.stop()

    asyncio.run(test())


@pytest.mark.parametrize("field", ["max_input_bytes", "max_header_bytes", "max_header_count", "header_timeout_s",
                                   "body_timeout_s", "idle_timeout_s", "max_pipelined", "max_buffered_bytes"])
def test_limits_must_be_positive(field):
    with pytest.raises(ValueError, match=f"HTTP limit '{field}' must be positive, got 0"):
        HttpLimits(**{field: 0})
