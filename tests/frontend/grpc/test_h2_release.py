"""One release path for response buffers (issue 14): the transport calls a response's `on_sent` exactly once, when
it no longer needs the bytes, however the call ends: answered, answered to a slow reader, cancelled mid-send,
reset, past its deadline, on a lost connection, refused by the handler, unserialisable; the grpcio fallback
releases right after its join; the servicer gives back responses still queued in a stream it abandons."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Sequence
from typing import Any

import grpc
import numpy as np
import pytest

from pytriton.frontend.grpc.wire import (
    InferResponseWire,
    StreamResponseWire,
    infer_response_chunks,
    wire_bytes,
)
from tests.frontend.grpc.inproc import PATTERN, InProcessServer, connection, wait_until
from tests.frontend.grpc.raw_h2 import (
    CANCEL,
    DATA,
    S_INITIAL_WINDOW_SIZE,
    S_MAX_FRAME_SIZE,
    RawH2,
    grpc_message,
    ping,
    rst_stream,
    window_update,
)

BIG_WINDOWS = ((S_INITIAL_WINDOW_SIZE, 2**31 - 1), (S_MAX_FRAME_SIZE, (1 << 24) - 1))


def call(raw: RawH2, stream_id: int, path: str, body: bytes, extra: Sequence[tuple[str, str]] = ()) -> None:
    headers = [("content-type", "application/grpc"), ("te", "trailers"), *extra]
    raw.headers(stream_id, raw.request(path, "POST", headers), end_stream=False)
    raw.data(stream_id, grpc_message(body))


def released_once(server: InProcessServer, count: int) -> None:
    ledger = server.ledger
    wait_until(server, lambda: len(ledger.released) >= count, f"{count} releases (have {ledger.released})")
    time.sleep(0.1)  # an absence check: no release beyond `count` comes (a slow machine can only miss one, not fail)
    assert server.run(lambda: sorted(ledger.released)) == list(range(1, count + 1))
    assert server.run(lambda: ledger.made) == count


def big_windows(raw: RawH2) -> None:
    raw.handshake(*BIG_WINDOWS)
    raw.send(window_update(0, 2**31 - 1 - 65535))


def test_answer_releases_once():
    with InProcessServer() as server, RawH2(server.port) as raw:
        big_windows(raw)
        for stream_id, size in ((1, 1000), (3, 3_000_000)):  # in one write; and past the default windows
            call(raw, stream_id, "/t.S/Big", str(size).encode())
            _, data, trailers = raw.answer(stream_id)
            assert trailers["grpc-status"] == "0" and data[5:] == bytes([PATTERN]) * size
        released_once(server, 2)


def test_large_answer_to_a_slow_reader_is_released_once_sent():
    """The socket does not take 16 MB at once: the transport keeps the rest (Python 3.12 keeps a view of our
    buffer), so the buffer goes back only when all of it has been sent; the client gets every byte intact (a
    buffer released early would be overwritten)."""
    size = 16 << 20
    with InProcessServer() as server, RawH2(server.port, rcvbuf=64 * 1024) as raw:
        big_windows(raw)
        call(raw, 1, "/t.S/Big", str(size).encode())
        wait_until(server, lambda: server.ledger.made == 1, "the answer is made")
        # The moment that matters: the socket took what it could, the transport holds the rest (not a guessed 0.5 s).
        conn = server.run(lambda: connection(server))
        wait_until(server, lambda: conn.transport.get_write_buffer_size() > 0, "the transport holds the rest")
        assert server.run(lambda: server.ledger.released) == []
        _, data, trailers = raw.answer(1)
        assert trailers["grpc-status"] == "0"
        assert data[5:] == bytes([PATTERN]) * size
        released_once(server, 1)


@pytest.mark.parametrize("how", ["rst_stream", "connection_lost"])
def test_cancel_mid_send_releases_once(how):
    """The client's 64 KiB window holds back most of a 1 MB answer; the client then resets the stream, or goes."""
    with InProcessServer() as server:
        raw = RawH2(server.port)
        raw.handshake()
        call(raw, 1, "/t.S/Big", b"1000000")
        raw.wait_for(lambda f: f.type == DATA and f.stream_id == 1, "the first DATA")
        assert server.run(lambda: server.ledger.released) == []
        if how == "rst_stream":
            raw.send(rst_stream(1, CANCEL))
            raw.send(ping())
            raw.expect_ping_ack()  # the connection goes on
        else:
            raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        raw.close()
        released_once(server, 1)


def test_deadline_while_the_window_holds_the_answer_releases_once():
    with InProcessServer() as server, RawH2(server.port) as raw:
        raw.handshake((S_INITIAL_WINDOW_SIZE, 0))
        call(raw, 1, "/t.S/Big", b"100000", [("grpc-timeout", "300m")])
        _, _, trailers = raw.answer(1)
        assert trailers["grpc-status"] == str(grpc.StatusCode.DEADLINE_EXCEEDED.value[0])
        released_once(server, 1)


@pytest.mark.parametrize("path, code", [("/t.S/Refused", grpc.StatusCode.NOT_FOUND),
                                        ("/t.S/Broken", grpc.StatusCode.UNKNOWN)])  # fmt: skip
def test_response_never_sent_is_released_once(path, code):
    """A handler that returns a response but ends the call with another status, or whose response cannot be
    serialised: the response is dropped and its buffers go back."""
    with InProcessServer() as server, RawH2(server.port) as raw:
        raw.handshake()
        call(raw, 1, path, b"1000")
        _, _, trailers = raw.answer(1)
        assert trailers["grpc-status"] == str(code.value[0])
        released_once(server, 1)


@pytest.mark.parametrize("how", ["rst_stream", "connection_lost"])
def test_streamed_answers_each_released_once(how):
    """A server-streaming call whose client reads slowly (its window holds the output back, the handler waits on
    its backlog), then resets the stream or goes: every answer made is released once."""
    with InProcessServer() as server:
        raw = RawH2(server.port)
        raw.handshake()
        call(raw, 1, "/t.S/Stream", b"300000")
        for _ in range(3):
            raw.wait_for(lambda f: f.type == DATA and f.stream_id == 1, "DATA")
        wait_until(server, lambda: server.ledger.made >= 10, "answers queued up to the backlog")
        if how == "rst_stream":
            raw.send(rst_stream(1, CANCEL))
            raw.send(ping())
            raw.expect_ping_ack()
        raw.close()
        wait_until(server, lambda: len(server.ledger.released) >= server.ledger.made, "every answer released")
        time.sleep(0.1)  # an absence check: no second release comes (a slow machine can only miss one, not fail)
        made = server.run(lambda: server.ledger.made)
        assert server.run(lambda: sorted(server.ledger.released)) == list(range(1, made + 1))


def test_grpcio_join_releases_once():
    """The grpcio fallback joins a response into bytes and releases its buffers right after, even if the join
    fails."""
    releases = []
    message = InferResponseWire(
        pytest.importorskip("tritonclient.grpc").service_pb2.ModelInferResponse(model_name="m"),
        [np.arange(4, dtype=np.float32).data.cast("B")],
        lambda: releases.append("infer"),
    )
    data = wire_bytes(infer_response_chunks, message)
    assert data.endswith(np.arange(4, dtype=np.float32).tobytes()) and releases == ["infer"]
    broken = StreamResponseWire(InferResponseWire(None, [], lambda: releases.append("stream")))
    with pytest.raises(AttributeError):
        wire_bytes(lambda r: r.response.chunks(), broken)
    assert releases == ["infer", "stream"]


def test_servicer_releases_what_its_stream_queue_still_holds(monkeypatch):
    """ModelStreamInfer answers requests concurrently through a queue; a stream abandoned (client gone, reset)
    with answers still queued gives their buffers back."""
    from tritonclient.grpc import service_pb2 as pb

    from pytriton.core.types import InferResponse
    from pytriton.frontend.grpc import servicer as servicer_module
    from pytriton.frontend.grpc.servicer import InferenceServicer

    released: list[int] = []
    queued = 0  # answers the servicer has put on its stream's queue

    class CountedResponses(servicer_module.StreamResponses):
        async def put(self, item: Any) -> None:
            nonlocal queued
            await super().put(item)
            queued += 1

    monkeypatch.setattr(servicer_module, "StreamResponses", CountedResponses)

    class Model:
        name, version = "m", 1

        class config:
            decoupled = False

    class Registry:
        def get(self, name: str, version: Any = None) -> Model:
            return Model()

    class Core:
        registry = Registry()

        async def infer(self, request: Any) -> InferResponse:
            number = int(request.id)
            return InferResponse("m", "1", request.id, [], _release=lambda: released.append(number))

    class Context:
        def invocation_metadata(self) -> tuple:
            return ()

        def peer(self) -> str:
            return "ipv4:127.0.0.1:1"

    async def requests():
        for i in range(5):
            yield pb.ModelInferRequest(model_name="m", id=str(i))

    async def main() -> list:
        servicer = InferenceServicer(Core())  # type: ignore[arg-type]
        stream = servicer.ModelStreamInfer(requests(), Context())
        first = await stream.__anext__()
        deadline = time.monotonic() + 30
        while queued < 5 and time.monotonic() < deadline:  # the other four are answered and queued
            await asyncio.sleep(0.001)
        assert queued == 5, f"{queued} of 5 answers queued"
        await stream.aclose()  # type: ignore[attr-defined]  # the transport abandons the stream
        return [first]

    (first,) = asyncio.run(main())
    assert len(released) == 4 and len(set(released)) == 4  # the four still queued; the first is the transport's
    first.response.on_sent()
    assert sorted(released) == [0, 1, 2, 3, 4]
