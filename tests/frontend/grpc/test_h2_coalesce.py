"""The answers of one loop turn to one HTTP/2 connection leave in one send, complete and in order; a client that does
not read its answers holds no other connection's."""

from __future__ import annotations

import time

import hpack

from tests.frontend.grpc.inproc import InProcessServer, connection, echo_works, request, wait_until
from tests.frontend.grpc.raw_h2 import (
    DATA,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    S_INITIAL_WINDOW_SIZE,
    RawH2,
    frame,
    grpc_message,
    ping,
    window_update,
)

MAX_WINDOW = 2**31 - 1


def _count_sends(server: InProcessServer) -> list[int]:
    """Sizes of the writes the connection's writer hands to asyncio's transport from now on."""
    sizes: list[int] = []

    def spy() -> None:
        inner = connection(server).writer.transport
        write = inner.write

        def counted(data) -> None:  # noqa: ANN001
            sizes.append(len(data))
            write(data)

        inner.write = counted

    server.run(spy)
    return sizes


def _answers(raw: RawH2, stream_ids: list[int]) -> tuple[dict[int, bytes], list[int]]:
    """Each stream's DATA (gRPC messages) once all have ended OK, and the order in which their trailers came."""
    decoder = hpack.Decoder()
    data: dict[int, bytearray] = {sid: bytearray() for sid in stream_ids}
    heads: dict[int, int] = {sid: 0 for sid in stream_ids}
    ended: list[int] = []
    while len(ended) < len(stream_ids):
        item = raw.read_frame()
        assert item is not None, "the connection closed"
        if item.stream_id not in data:
            continue
        assert item.stream_id not in ended, f"{item} after the stream's trailers"
        if item.type == DATA:
            assert heads[item.stream_id] == 1, f"DATA before the response headers on stream {item.stream_id}"
            data[item.stream_id] += item.payload
        elif item.type == HEADERS:
            fields = dict(decoder.decode(item.payload))
            heads[item.stream_id] += 1
            if item.flags & END_STREAM:
                assert fields["grpc-status"] == "0", fields
                ended.append(item.stream_id)
            else:
                assert fields[":status"] == "200", fields
    return {sid: bytes(body) for sid, body in data.items()}, ended


def test_one_batch_of_answers_leaves_in_one_send_complete_and_in_order():
    """64 calls on one connection answered in one loop turn (a batch's completion): their 64 answers (headers,
    message, trailers each) go to the socket in one write, the acknowledgements of the read that brought the calls
    (PING, WINDOW_UPDATE) in one more; the client gets every answer whole, each stream's frames in order."""
    calls = 64
    with InProcessServer() as server, RawH2(server.port) as raw:
        raw.handshake()
        server.ledger.together = calls
        sends = _count_sends(server)
        stream_ids = list(range(1, 2 * calls, 2))
        bodies = {sid: bytes([sid % 251]) * (100 + sid) for sid in stream_ids}
        burst = bytearray()
        for sid in stream_ids:  # all of them in one send: one read on the server, one turn of answers
            block = request(raw, "/t.S/Together")
            burst += frame(HEADERS, END_HEADERS, sid, block) + frame(DATA, END_STREAM, sid, grpc_message(bodies[sid]))
        burst += ping(b"coalesce")
        raw.send(bytes(burst))
        data, ended = _answers(raw, stream_ids)
        # Answered in the order the calls were woken: the last call wakes the others and goes on at once.
        assert ended == [stream_ids[-1], *stream_ids[:-1]]
        for sid in stream_ids:
            assert data[sid] == grpc_message(bodies[sid]), f"stream {sid}"
        expected = sum(len(bodies[sid]) for sid in stream_ids)
        assert len(sends) <= 2 and max(sends) > expected, f"{len(sends)} writes for one turn's answers: {sends}"


def test_answers_of_different_turns_are_not_held_back():
    """One call at a time: each answer leaves at the end of its own turn (nothing waits for a batch)."""
    with InProcessServer() as server, RawH2(server.port) as raw:
        raw.handshake()
        sends = _count_sends(server)
        for sid in range(1, 21, 2):
            echo_works(raw, sid)
        assert len(sends) == 10


def test_a_client_that_does_not_read_holds_no_other_connection():
    """A client with wide-open windows asks for 400 answers of 32 KiB and reads none of them; meanwhile another
    client on its own connection gets each of its answers at once. The first then reads all of its answers whole."""
    with InProcessServer() as server:
        slow = RawH2(server.port, rcvbuf=4096)
        slow.handshake((S_INITIAL_WINDOW_SIZE, MAX_WINDOW))
        slow.send(window_update(0, MAX_WINDOW - 65535))
        (slow_conn,) = server.run(lambda: list(server.connections))
        stream_ids = list(range(1, 801, 2))
        body = b"s" * 32768
        burst = bytearray()
        for sid in stream_ids:
            burst += frame(HEADERS, END_HEADERS, sid, request(slow, "/t.S/Echo"))
            burst += frame(DATA, END_STREAM, sid, grpc_message(body))
        slow.send(bytes(burst))
        wait_until(server, lambda: slow_conn.transport is not None and slow_conn.transport.get_write_buffer_size()
                   > 4 << 20, "the slow client's answers pile up in its transport")
        with RawH2(server.port) as fast:
            fast.handshake()
            started = time.monotonic()
            for sid in range(1, 41, 2):
                echo_works(fast, sid)
            assert time.monotonic() - started < 5.0
        assert server.run(lambda: slow_conn.transport.get_write_buffer_size()) > 0  # still not read
        data, ended = _answers(slow, stream_ids)
        assert sorted(ended) == stream_ids
        assert all(data[sid] == grpc_message(body) for sid in stream_ids)
        slow.close()

