"""Answers whose body a stream yields (`HttpResponse.stream`, the generate_stream route): framed in chunks, taken from
the stream only as fast as the client takes them, and the stream closed however the answer ends."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from pytriton.frontend.http1 import HttpLimits, HttpRequest, HttpResponse
from pytriton.frontend.http1.connection import WRITE_HIGH
from tests.frontend.http1._fake import Client, get, run, settle


class Parts:
    """A stream of `count` parts of `size` bytes that records how many were taken and whether it was closed."""

    def __init__(self, count: int, size: int = 10, fail_at: int = -1):
        self.count, self.size, self.fail_at = count, size, fail_at
        self.taken = 0
        self.closed = False
        self.client: Client | None = None  # set: its transport holds more than WRITE_HIGH once a part was taken

    async def stream(self) -> AsyncGenerator[bytes, None]:
        try:
            for i in range(self.count):
                if i == self.fail_at:
                    raise RuntimeError("the stream broke")
                self.taken += 1
                yield bytes([65 + i % 26]) * self.size
                if self.client is not None and self.taken == 1:  # (the client stops reading)
                    self.client.hold(WRITE_HIGH + 1)
        finally:
            self.closed = True


def streaming_client(parts: Parts, limits: HttpLimits | None = None) -> Client:
    async def handler(request: HttpRequest) -> HttpResponse:
        if request.path == "/stream":
            return HttpResponse(200, [], [("Content-Type", "text/event-stream")], stream=parts.stream())
        return HttpResponse(200, [b"plain"])

    client = Client(limits or HttpLimits(), handler)
    return client


def stalling_client(parts: Parts, limits: HttpLimits | None = None) -> Client:
    """A client that stops reading once the first part was written."""
    client = parts.client = streaming_client(parts, limits)
    return client


def test_a_streamed_answer_is_chunked_and_the_next_request_follows():
    async def test() -> None:
        parts = Parts(3)
        client = streaming_client(parts)
        client.send(get("/stream") + get("/other"))
        await settle()
        written = bytes(client.transport.written)
        head, _, rest = written.partition(b"\r\n\r\n")
        assert b"Transfer-Encoding: chunked" in head and b"Content-Length" not in head
        assert rest.startswith(b"a\r\nAAAAAAAAAA\r\na\r\nBBBBBBBBBB\r\na\r\nCCCCCCCCCC\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n")
        assert rest.endswith(b"\r\n\r\nplain")
        assert parts.closed and not client.transport.closed

    run(test)


def test_an_http10_client_gets_the_parts_unchunked_and_the_connection_closed():
    # An HTTP/1.0 client cannot read chunks (RFC 9112 section 6.1: no Transfer-Encoding to a 1.0 request): the body
    # is the parts as they come, ended by the close; it was chunked, which such a client takes for the body itself.
    for connection in (b"", b"Connection: keep-alive\r\n"):
        async def test() -> None:
            parts = Parts(3)
            client = streaming_client(parts)
            client.send(b"GET /stream HTTP/1.0\r\n" + connection + b"\r\n")
            await settle()
            written = bytes(client.transport.written)
            head, _, rest = written.partition(b"\r\n\r\n")
            assert b"Transfer-Encoding" not in head and b"Content-Length" not in head
            assert b"Connection: close" in head
            assert rest == b"AAAAAAAAAABBBBBBBBBBCCCCCCCCCC"
            assert parts.closed and client.transport.closed

        run(test)


def test_the_stream_waits_while_the_client_does_not_take_its_parts():
    async def test() -> None:
        parts = Parts(1000, size=1000)
        client = stalling_client(parts)
        client.send(get("/stream"))
        await settle()
        assert parts.taken == 2  # the part taken as the client stopped reading, then none
        client.hold(0)
        await settle()
        assert parts.taken > 1

    run(test)


def test_a_client_that_takes_nothing_is_dropped_and_the_stream_closed():
    async def test() -> None:
        parts = Parts(1000)
        client = stalling_client(parts, HttpLimits(body_timeout_s=3))
        client.send(get("/stream"))
        await settle()
        client.connection.tick(client.now(3.1))
        assert client.transport.aborted
        client.hang_up()
        await settle()
        assert parts.closed and parts.taken == 2

    run(test)


def test_a_connection_lost_mid_stream_closes_the_stream():
    async def test() -> None:
        parts = Parts(1000)
        client = stalling_client(parts)
        client.send(get("/stream"))
        await settle()
        client.hang_up()
        await settle()
        assert parts.closed and parts.taken == 2

    run(test)


def test_a_stream_that_fails_half_way_ends_the_connection_without_a_last_chunk():
    async def test() -> None:
        parts = Parts(3, fail_at=2)
        client = streaming_client(parts)
        client.send(get("/stream"))
        await settle()
        assert client.transport.aborted and parts.closed
        assert not bytes(client.transport.written).endswith(b"0\r\n\r\n")

    run(test)
