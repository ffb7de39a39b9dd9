"""`HttpConnection` driven by a fake transport, the way asyncio's selector transport drives a buffered protocol
(get_buffer, recv into it, buffer_updated with the view still alive), and a fake clock (`tick(now)`)."""

from __future__ import annotations

import asyncio
import json
import random
import zlib

import pytest

from pytriton.frontend.http1 import HttpLimits, HttpRequest, HttpResponse
from pytriton.frontend.http1.body import FIRST_BLOCK, DirectBody
from pytriton.frontend.http1.connection import LINGER_S, SPARE_KEEP_S, WRITE_HIGH
from tests.frontend.http1._fake import Client, chunked, get, post, run, settle

LIMIT = 300


@pytest.mark.parametrize("size, status", [(LIMIT, 200), (LIMIT + 1, 431)])
@pytest.mark.parametrize("before", [b"", get(), post(b"x" * 50), chunked(b"y" * 40)], ids=["first", "get", "post", "chunked"])
def test_head_size_is_exact_however_the_reads_fall(size, status, before):
    """A head of exactly the limit passes and one byte more is refused, whatever request came before it in the
    same reads and wherever the reads are cut."""
    head = get(pad_to=size)
    assert len(head) == size
    wire = before + head

    async def test() -> None:
        for step in (len(wire), 1, 2, 3, 5, 64, 299):
            client = Client(HttpLimits(max_header_bytes=LIMIT))
            client.send(wire, step)
            await settle()
            statuses = [s for s, _ in client.answers()]
            assert statuses == ([200] if before else []) + [status], (step, statuses)
            assert client.transport.closed == (status == 431)

    run(test)


PAD = b"X-Pad: " + b"p" * LIMIT + b"\r\n"


@pytest.mark.parametrize("wire, statuses, paths", [
    # the fault first in the bytes decides: a bad header name, then a head past the limit
    (b"GET /a HTTP/1.1\r\nBad/Name: x\r\n" + PAD + b"\r\n", [400], []),
    (chunked(b"y" * 40) + b"GET /b HTTP/1.1\r\n" + PAD + b"Bad/Name: x\r\n\r\n", [200, 431], ["/c"]),
    # a head after a chunked body is measured as sent (spaces around a value count)
    (chunked(b"y" * 40) + b"GET /o HTTP/1.1\r\nX-Pad:" + b" " * 60 + b"p" * 230 + b"\r\n\r\n", [200, 431], ["/c"]),
    # a request line without a version may end with a bare LF: that head ends at LF CR LF, not CR LF CR LF
    (b"GET /$\n\r\n{}" + b"x" * LIMIT, [400], []),  # (HTTP/0.9: refused since 2026-12-07, however the reads fall)
], ids=["bad-name-then-limit", "chunked-then-limit-then-bad-name", "chunked-then-spaces", "head-ended-by-lf"])
def test_a_head_is_answered_alike_however_the_reads_fall(wire, statuses, paths):
    """Found by fuzzing (tests/fuzz, harness http1; the inputs are the corpus's `regress-error-past-head-limit` and
    `regress-head-ended-by-lf`): the head-size limit was checked against bytes the parser had not seen yet (up to the
    next CR LF CR LF, or the end of the read), so one read said 431 where reads in pieces said 400 for a fault
    before the limit, and a head the parser ends at LF CR LF was refused in one read and served in pieces. The
    parser sees a head's bytes up to the limit and no further; what it finds first is the answer."""
    async def test() -> None:
        for step in (len(wire), 1, 2, 3, 5, 64, 299):
            client = Client(HttpLimits(max_header_bytes=LIMIT))
            client.inbox += wire
            while client.read_once(step):  # until the connection reads no more
                pass
            await settle()
            assert ([s for s, _ in client.answers()], [r.path for r in client.requests]) == (statuses, paths), step
            assert client.transport.closed

    run(test)


CHUNKED_HEAD = b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


def _trailer(size: int) -> bytes:
    """What follows a chunked body's last data, `size` bytes: the CR LF closing the chunk, the last chunk's line, a
    trailer field and the final CR LF."""
    start, end = b"\r\n0\r\nX-T: ", b"\r\n\r\n"
    return start + b"t" * (size - len(start) - len(end)) + end


def _extended(size: int) -> bytes:
    """A chunk's size line of `size` bytes (its extension pads it), the chunk and the last chunk."""
    start, end = b"1;e=", b"\r\n"
    return start + b"e" * (size - len(start) - len(end)) + end + b"x\r\n0\r\n\r\n"


@pytest.mark.parametrize("size, status", [(LIMIT, 200), (LIMIT + 1, 431)])
@pytest.mark.parametrize("body", [lambda n: b"1\r\nx" + _trailer(n), _extended], ids=["trailer", "extension"])
def test_chunk_framing_is_held_to_the_head_limit(body, size, status):
    """What a chunked body holds between its chunks' data (a size line with its extensions; after the last data,
    the trailer fields) is held to the head limit, exactly, however the reads fall: the parser gathers a trailer
    field's value whole, and it was unbounded (a client could send gigabytes of one trailer field, answered by
    nothing while the server's memory grew)."""
    wire = CHUNKED_HEAD + body(size) + get()

    async def test() -> None:
        for step in (len(wire), 1, 2, 3, 5, 64, 299):
            client = Client(HttpLimits(max_header_bytes=LIMIT))
            client.inbox += wire
            while client.read_once(step):
                pass
            await settle()
            statuses = [s for s, _ in client.answers()]
            assert statuses == ([200, 200] if status == 200 else [431]), (step, statuses)
            if status == 431:
                assert "chunk" in json.loads(client.answers()[0][1])["error"]

    run(test)


def test_a_trailer_field_of_megabytes_is_refused_at_the_limit():
    async def test() -> None:
        client = Client(HttpLimits(max_header_bytes=LIMIT))
        client.inbox += CHUNKED_HEAD + b"1\r\nx\r\n0\r\nX-T: " + b"t" * (8 << 20)
        reads = 0
        while client.read_once(65536):
            reads += 1
        await settle()
        assert [s for s, _ in client.answers()] == [431] and reads == 1 and client.transport.closed

    run(test)


def test_chunked_body_with_extensions_and_trailers_cut_at_every_byte():
    """Chunks of 0x1a and 3 bytes (with extensions), a trailer field, then a GET: whole, and in two reads cut
    anywhere, the same two requests."""
    wire = (CHUNKED_HEAD + b"1A;a=b\r\n" + b"\n\r\n" * 8 + b"xy\r\n003;q=\"1\"\r\nabc\r\n0;z\r\nX-T: v\r\n\r\n"
            + get("/after"))

    async def test() -> None:
        for cut in range(len(wire)):
            client = Client(HttpLimits(max_header_bytes=LIMIT))
            client.send(wire[:cut])
            client.send(wire[cut:])
            await settle()
            assert [(r.path, bytes(r.body)) for r in client.requests] == [
                ("/c", b"\n\r\n" * 8 + b"xyabc"), ("/after", b"")], cut
            assert client.requests[0].headers["x-t"] == "v"

    run(test)


def test_head_cut_at_every_byte():
    head = get(pad_to=LIMIT)

    async def test() -> None:
        for cut in range(1, len(head)):
            client = Client(HttpLimits(max_header_bytes=LIMIT))
            client.send(head[:cut])
            client.send(head[cut:])
            await settle()
            assert client.answers() == [(200, b"0")], cut

    run(test)


def test_header_count_limit_and_repeated_names_joined_in_order():
    async def test() -> None:
        client = Client(HttpLimits(max_header_count=6))
        client.send(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-B: z\r\nx-a: 2\r\nX-A: 3\r\nX-B: w\r\n\r\n")
        await settle()
        assert client.requests[0].headers == {"host": "x", "x-a": "1, 2, 3", "x-b": "z, w"}
        client = Client(HttpLimits(max_header_count=6))
        client.send(get(fields=7))
        await settle()
        status, body = client.answers()[0]
        assert status == 431 and "more than 6 header fields" in json.loads(body)["error"]

    run(test)


def test_many_repeated_names_within_the_limits():
    """20,000 lines of one name (quadratic to join line by line): one value, in order."""
    async def test() -> None:
        client = Client(HttpLimits(max_header_count=30_000, max_header_bytes=1 << 20))
        client.send(b"GET / HTTP/1.1\r\n" + b"".join(b"X-N: %d\r\n" % i for i in range(20_000)) + b"\r\n", 65536)
        await settle()
        assert client.requests[0].headers["x-n"] == ", ".join(str(i) for i in range(20_000))

    run(test)


def test_large_body_buffer_grows_with_bytes_received():
    length = 8 << 20
    body = bytes(range(256)) * (length // 256)

    async def test() -> None:
        client = Client(HttpLimits())
        wire = post(body)
        head_size = len(wire) - length
        client.send(wire[: head_size + 1000])
        direct = client.connection._direct
        assert direct is not None and len(direct.buffer) == FIRST_BLOCK  # not 8 MiB
        received = 1000
        for step in (30_000, 200_000, 1_000_000):
            client.send(wire[head_size + received : head_size + received + step], 65536)
            received += step
            assert len(direct.buffer) <= 2 * received + FIRST_BLOCK
        client.send(wire[head_size + received :], 1 << 20)
        await settle()
        assert client.requests[0].body == body and len(client.requests[0].body) == length
        assert client.answers() == [(200, str(length).encode())]

    run(test)


def test_large_body_buffer_is_reused_and_dropped_when_idle():
    async def test() -> None:
        client = Client(HttpLimits())
        client.send(post(b"a" * 100_000))
        await settle()
        first = id(client.requests.pop().body)  # the handler is done with it: it may serve the next body
        client.send(post(b"b" * 100_000))
        await settle()
        second = client.requests[-1].body
        assert second == b"b" * 100_000
        assert id(second) == first  # the same buffer (kept alive as the spare meanwhile, so no other object)
        held = client.requests.pop().body
        client.send(post(b"c" * 100_000))  # the previous body is still held: a new buffer
        await settle()
        assert client.requests[-1].body is not held and held == b"b" * 100_000
        client.connection.tick(client.now(SPARE_KEEP_S + 0.1))
        assert client.connection._spare is None

    run(test)


def test_direct_body_room_and_add():
    body = DirectBody(200_000)
    assert len(body.buffer) == FIRST_BLOCK
    assert body.add(b"x" * 100_000) == 100_000  # copied in past the first block
    assert body.full and body.growth() == 100_000
    body.grow()
    room = body.room()
    assert len(room) == 100_000 and len(body.buffer) == 200_000
    room[:] = b"y" * 100_000
    del room
    body.received(100_000)
    assert body.complete and body.buffer == b"x" * 100_000 + b"y" * 100_000
    assert body.add(b"more") == 0


@pytest.mark.parametrize("wire, status", [(b"GET / HTTP/1.1\r\nHost:", 408), (post(b"x" * 10)[:-5], 408),
                                          (post(b"x" * 100_000)[:-5000], 408), (b"", None)])
def test_deadlines(wire, status):
    """A late head or body gets 408; a quiet connection is closed without an answer. Nothing happens early."""
    limits = HttpLimits(header_timeout_s=5, body_timeout_s=7, idle_timeout_s=9)
    timeout = {b"G": 5, b"P": 7}.get(wire[:1], 9)

    async def test() -> None:
        client = Client(limits)
        client.send(wire)
        client.connection.tick(client.now(timeout - 0.5))
        await settle()
        assert not client.transport.closed and not client.answers()
        client.connection.tick(client.now(timeout + 0.1))
        await settle()
        assert client.transport.closed
        assert [s for s, _ in client.answers()] == ([] if status is None else [status])

    run(test)


def test_head_timeout_counts_from_its_first_byte_not_its_last():
    async def test() -> None:
        client = Client(HttpLimits(header_timeout_s=5))
        start = client.now()
        for i, byte in enumerate(b"GET / HTTP/1.1\r\nX: aaaa"):
            client.send(bytes([byte]))
            client.connection.tick(start + 0.1 * i)  # ticks pass, bytes keep coming
        client.connection.tick(start + 5.1)
        await settle()
        assert [s for s, _ in client.answers()] == [408]

    run(test)


def test_answers_wait_while_the_client_does_not_read():
    """More than WRITE_HIGH unsent: the next pipelined request waits, the connection stops reading once enough
    requests wait, and everything goes on when the transport has sent what it held."""
    limits = HttpLimits(max_pipelined=4, body_timeout_s=3)

    async def test() -> None:
        client = Client(limits)
        client.hold(WRITE_HIGH + 1)
        client.send(get() * 6)
        await settle()
        assert not client.requests  # unsent answers: the requests wait for the transport
        assert not client.transport.reading
        client.connection.tick(client.now(2))
        assert not client.transport.aborted
        client.hold(0)
        await settle()
        assert len(client.requests) == 6 and client.transport.reading
        assert [s for s, _ in client.answers()] == [200] * 6

    run(test)


def test_client_that_takes_no_answer_is_dropped():
    async def test() -> None:
        client = Client(HttpLimits(body_timeout_s=3))
        client.hold(WRITE_HIGH + 1)
        client.send(get() * 3)
        await settle()
        client.hold(WRITE_HIGH - 1000)  # some progress within the body timeout
        client.connection.tick(client.now(3.1))
        assert not client.transport.aborted
        client.connection.tick(client.now(6.2))  # none since
        assert client.transport.aborted

    run(test)


def test_idle_connection_still_sending_is_not_closed_as_idle():
    async def test() -> None:
        client = Client(HttpLimits(idle_timeout_s=2, body_timeout_s=3))
        client.send(get())
        await settle()
        client.hold(1000)  # the answer is still going out
        client.connection.tick(client.now(2.1))
        assert not client.transport.closed and not client.transport.aborted
        client.hold(0)
        client.connection.tick(client.now(4.2))
        assert client.transport.closed

    run(test)


def test_no_deadline_while_not_reading():
    """Reading paused (too many requests wait): a head under way cannot be late meanwhile."""
    async def slow(request: HttpRequest) -> HttpResponse:
        await asyncio.sleep(3600)
        raise AssertionError

    async def test() -> None:
        client = Client(HttpLimits(max_pipelined=2, header_timeout_s=1), handler=slow)
        client.send(get() * 3 + b"GET / HT")
        await settle()
        assert not client.transport.reading
        client.connection.tick(client.now(100))
        assert not client.answers() and not client.transport.closed
        client.connection.task.cancel()

    run(test)


def test_too_large_body_and_no_reading_after_it():
    async def test() -> None:
        client = Client(HttpLimits(max_input_bytes=100))
        client.send(post(b"x" * 101) + get())
        await settle()
        assert [s for s, _ in client.answers()] == [413] and client.transport.closed and not client.requests

    run(test)


def test_a_chunked_body_past_the_limit_is_refused_when_it_passes_it():
    """A chunked body that passes the input limit gets its 413 at once: the server does not read on to its last
    chunk (which an endless body never sends), and closes."""
    async def test() -> None:
        client = Client(HttpLimits(max_input_bytes=100))
        client.send(b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + b"40\r\n" + b"x" * 64
                    + b"\r\n40\r\n" + b"x" * 64)  # 128 bytes of data; no last chunk
        await settle()
        assert [s for s, _ in client.answers()] == [413] and client.transport.closed and not client.requests
        assert not client.transport.reading and client.budget.used == 0

    run(test)


@pytest.mark.parametrize("sent", [0, 10, 60_000])
def test_a_declared_body_past_the_limit_is_refused_at_its_head(sent):
    """A Content-Length past the input limit is refused as soon as the head is read, whatever of the body came."""
    async def test() -> None:
        client = Client(HttpLimits(max_input_bytes=100))
        client.send(f"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: {10**12}\r\n\r\n".encode() + b"x" * sent)
        await settle()
        assert [s for s, _ in client.answers()] == [413] and client.transport.closed and not client.requests
        assert b"request size of 1000000000000 bytes exceeds" in client.answers()[0][1]

    run(test)


def test_after_a_refusal_the_connection_lingers_dropping_what_still_comes():
    """Where the transport can end its sending side: after the refusal's answer it does (the client reads the answer,
    then the end), reads on and drops what the client still sends, unparsed, and closes at LINGER_S."""
    async def test() -> None:
        client = Client(HttpLimits(max_input_bytes=100))
        client.transport.eof_capable = True
        client.send(f"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: {10**12}\r\n\r\n".encode() + b"x" * 1000)
        await settle()
        assert [s for s, _ in client.answers()] == [413]
        assert client.transport.eof and client.transport.reading and not client.transport.closed
        client.send((b"x" * 60_000 + get()) * 20)  # the rest of the body, and requests: dropped, not parsed
        await settle()
        assert [s for s, _ in client.answers()] == [413] and not client.requests
        client.connection.tick(client.now(LINGER_S * 0.9))
        assert not client.transport.closed
        client.connection.tick(client.now(LINGER_S))
        assert client.transport.closed and client.budget.used == 0

    run(test)


@pytest.mark.parametrize("wire", [b"GET /v2/health/ready\r\n\r\n", b"GET /v2/health/ready\n\r\n",
                                  get() + b"GET /v2/health/ready\r\n\r\n" + get()])
def test_a_request_line_without_a_version_is_refused(wire):
    """HTTP/0.9 (a request line without a version): not answered as HTTP/1.1 with keep-alive, but refused with 400
    and the connection closed (requests before it are answered; nothing after it is read)."""
    async def test() -> None:
        client = Client(HttpLimits())
        client.send(wire)
        await settle()
        answers = client.answers()
        assert [s for s, _ in answers] == [200] * (len(client.requests)) + [400] and len(client.requests) <= 1
        assert json.loads(answers[-1][1]) == {"error": "malformed HTTP request: the request line has no HTTP version "
                                                       "(HTTP/0.9 is not supported)"}
        assert client.transport.closed

    run(test)


@pytest.mark.parametrize("version, connection, says, closes", [
    ("1.1", "", None, False), ("1.1", "close", "close", True), ("1.0", "", "close", True),
    ("1.0", "keep-alive", "keep-alive", False), ("1.0", "Keep-Alive", "keep-alive", False)])
def test_an_answer_says_whether_the_connection_persists(version, connection, says, closes):
    """An HTTP/1.0 client that asked to keep the connection is told it is kept (it would take the answer's end for the
    connection's otherwise, as ApacheBench's -k does); HTTP/1.1 persists unless told otherwise."""
    async def test() -> None:
        client = Client(HttpLimits())
        field = f"Connection: {connection}\r\n" if connection else ""
        client.send(f"GET /v2/health/live HTTP/{version}\r\nHost: x\r\n{field}\r\n".encode())
        await settle()
        head = bytes(client.transport.written).partition(b"\r\n\r\n")[0].decode().split("\r\n")
        fields = [line.split(": ", 1)[1] for line in head if line.lower().startswith("connection:")]
        assert fields == ([says] if says else [])
        assert client.transport.closed is closes

    run(test)


def test_pipelined_mix_in_random_reads():
    """Bodyless, small, large (received into their own buffer) and chunked requests pipelined on one connection
    and cut into reads at random: every request arrives whole and in order."""

    async def test() -> None:
        for seed in range(40):
            rng = random.Random(seed)
            wire, expected = b"", []
            for _ in range(rng.randint(1, 12)):
                kind = rng.choice(["get", "small", "large", "chunked"])
                size = {"get": 0, "small": rng.randint(0, 3000), "large": rng.randint(65536, 200_000),
                        "chunked": rng.randint(1, 5000)}[kind]
                body = rng.randbytes(size)
                wire += {"get": lambda b: get(), "small": post, "large": post, "chunked": chunked}[kind](body)
                expected.append(zlib.crc32(body))
            client = Client(HttpLimits(max_pipelined=100))
            pos = 0
            while pos < len(wire):
                step = rng.choice([1, 7, 100, 4096, 65536, 1 << 20])
                client.send(wire[pos : pos + step])
                pos += step
            await settle()
            assert [zlib.crc32(bytes(r.body)) for r in client.requests] == expected, seed
            assert [s for s, _ in client.answers()] == [200] * len(expected)

    run(test)
