"""The listener-wide budget of buffered request bytes (`HttpLimits.max_buffered_bytes`): the accounting alone
(`BufferBudget`), then connections sharing one budget, driven by the fake transport: who stops reading and when,
the order they read again in, no deadlock, deadlines while stopped, and the counter back at zero however a
connection ends."""

from __future__ import annotations

import asyncio
import random
import zlib
from typing import Any

import pytest

from pytriton.frontend.http1 import HttpLimits, HttpRequest, HttpResponse
from pytriton.frontend.http1.body import FIRST_BLOCK
from pytriton.frontend.http1.budget import TIGHT_READ, BufferBudget
from pytriton.frontend.http1.connection import SPARE_KEEP_S
from tests.frontend.http1._fake import Client, chunked, get, post, run, settle

KiB = 1024


# ---- the accounting alone ------------------------------------------------------------------------
class Waiter:
    """A stand-in for a connection: records when the budget grants it."""

    def __init__(self, name: str, granted: list[str], spare: int = 0):
        self.name, self.granted, self.spare = name, granted, spare

    def budget_granted(self) -> None:
        self.granted.append(self.name)

    def give_up_spare(self) -> int:
        spare, self.spare = self.spare, 0
        return spare


def test_waiters_are_granted_in_order():
    granted: list[str] = []
    budget = BufferBudget(100)
    a, b = Waiter("a", granted), Waiter("b", granted)
    assert budget.try_take(60)
    assert not budget.wait(a, 50, 0)
    assert not budget.wait(b, 10, 0)  # it would fit, but `a` came first
    assert not budget.try_take(1) and budget.tight and not budget.roomy
    budget.release(60)
    assert granted == ["a", "b"] and budget.used == 60 and budget.waiting == 0
    budget.release(60)
    assert budget.used == 0 and not budget.tight and budget.peak == 60


def test_first_waiter_goes_past_the_limit_when_only_waiting_bodies_hold_memory():
    granted: list[str] = []
    budget = BufferBudget(100)
    a, b = Waiter("a", granted), Waiter("b", granted)
    budget.charge(50)  # a request in its handler: it will give its memory back
    budget.charge(40)  # what a's body holds
    assert not budget.wait(a, 30, 40)  # something else will release: wait for it
    budget.charge(20)  # b's body
    assert not budget.wait(b, 80, 20)
    budget.release(50)  # only waiting bodies hold memory now; a fits anyway (40 + 20 + 30)
    assert granted == ["a"] and budget.used == 90
    budget.release(70)  # a's request is done; b (20 held + 80) fits again
    assert granted == ["a", "b"] and budget.used == 100
    c = Waiter("c", granted)
    budget.charge(30)  # c's body, past the limit
    assert budget.wait(c, 500, 30) is False  # b's reservation is not waiting: c waits
    budget.release(100)  # nothing but c's own body left: c goes on past the limit, at once
    assert granted == ["a", "b", "c"] and budget.used == 530 and budget.peak == 530


def test_a_lone_waiter_past_the_limit_is_granted_at_once():
    budget = BufferBudget(100)
    budget.charge(80)
    assert budget.wait(Waiter("a", []), 500, 80)  # its own body is all there is: waiting would be for ever
    assert budget.used == 580


def test_spares_are_given_up_when_someone_waits_and_leaving_wakes_the_next():
    granted: list[str] = []
    budget = BufferBudget(100)
    spare = Waiter("spare", granted, spare=70)
    budget.charge(70)
    assert budget.keep_spare(spare)
    a, b = Waiter("a", granted), Waiter("b", granted)
    assert budget.try_take(20)
    assert budget.wait(a, 50, 0)  # 70 of spare given up: fits
    assert budget.used == 70 and spare.spare == 0
    assert not budget.wait(b, 40, 0)
    assert not budget.keep_spare(spare)  # someone waits: no spare kept
    budget.leave(b)
    assert budget.waiting == 0 and granted == []


# ---- connections sharing a budget ------------------------------------------------------------------
class Gate:
    """A handler that holds each request until the test lets it go (`answer`), or fails it (`fail`)."""

    def __init__(self) -> None:
        self.seen: list[HttpRequest] = []
        self.held: list[asyncio.Future] = []

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        self.seen.append(request)
        future = asyncio.get_running_loop().create_future()
        self.held.append(future)
        await future
        return HttpResponse(200, [str(zlib.crc32(bytes(request.body))).encode()])

    def answer(self, count: int = 1) -> None:
        for future in [f for f in self.held if not f.done()][:count]:
            future.set_result(None)

    def fail(self) -> None:
        next(f for f in self.held if not f.done()).set_exception(RuntimeError("handler bug"))


async def pump(clients: list[Client], step: int | None = None, rounds: int = 100_000) -> None:
    """Read round-robin, as the event loop does with readable sockets, until nothing moves."""
    for _ in range(rounds):
        moved = sum(client.read_once(step) for client in clients)
        await settle()
        if not moved and not any(c.inbox and c.transport.reading and not c.transport.closed for c in clients):
            return
    raise AssertionError("still reading")


def group(count: int, limits: HttpLimits, handler: Any = None) -> list[Client]:
    """`count` connections of one listener (one read buffer, one budget)."""
    first = Client(limits, handler)
    return [first] + [Client(limits, handler, shared=first) for _ in range(count - 1)]


def crc(status_and_body: tuple[int, bytes]) -> tuple[int, int]:
    return status_and_body[0], int(status_and_body[1])


def test_bodies_wait_for_memory_and_go_on_in_order():
    """300 KiB of budget, 200 KiB bodies: the second body stops reading when it would pass the budget, the third
    at once (someone waits); each reads again when a handler lets go of its body, first come first served."""
    limits = HttpLimits(max_buffered_bytes=300 * KiB)
    gate = Gate()
    bodies = [bytes([i]) * (200 * KiB) for i in range(3)]

    async def test() -> None:
        a, b, c = clients = group(3, limits, gate)
        budget = a.budget
        for client, body in zip(clients, bodies):
            client.inbox += post(body)
        await pump([a])
        assert [len(r.body) for r in gate.seen] == [200 * KiB] and budget.used == 200 * KiB
        await pump([b])
        await pump([c])
        assert not b.transport.reading and not c.transport.reading and budget.waiting == 2
        assert len(gate.seen) == 1 and b.inbox and c.inbox
        assert budget.used <= limits.max_buffered_bytes + TIGHT_READ
        gate.answer()  # a's handler lets go: b has its whole remaining body reserved, c still waits
        await settle()
        assert b.transport.reading and not c.transport.reading
        await pump(clients)
        assert [bytes(r.body[:1]) for r in gate.seen] == [b"\0", b"\1"]
        gate.answer()
        await pump(clients)
        gate.answer()
        await pump(clients)
        assert [bytes(r.body) for r in gate.seen] == bodies
        for client, body in zip(clients, bodies):
            assert [crc(x) for x in client.answers()] == [(200, zlib.crc32(body))]
        assert budget.used == 200 * KiB  # c's buffer, kept for its next body of that size
        c.connection.tick(c.now(SPARE_KEEP_S + 0.1))
        assert budget.used == 0 and budget.peak <= limits.max_buffered_bytes + TIGHT_READ

    run(test)


@pytest.mark.parametrize("step", [16 * KiB, 100 * KiB])
def test_bodies_that_hold_all_the_memory_do_not_wait_for_each_other(step):
    """Four 200 KiB bodies arrive interleaved and together fill the budget before any is complete: each then waits
    for memory only the others could give. The first waiter goes on past the limit, then the next."""
    limits = HttpLimits(max_buffered_bytes=256 * KiB)
    bodies = [bytes([i]) * (200 * KiB) for i in range(4)]

    async def test() -> None:
        clients = group(4, limits)
        for client, body in zip(clients, bodies):
            client.inbox += post(body)
        await pump(clients, step)
        for client, body in zip(clients, bodies):
            assert client.answers() == [(200, str(200 * KiB).encode())]
            assert bytes(client.requests[0].body) == body
        budget = clients[0].budget
        assert budget.waiting == 0
        assert budget.peak <= limits.max_buffered_bytes + 200 * KiB  # the limit and one body past it
        for client in clients:
            client.hang_up()
        assert budget.used == 0

    run(test)


def test_a_body_larger_than_the_whole_budget_waits_then_goes_on():
    limits = HttpLimits(max_buffered_bytes=100 * KiB, max_input_bytes=1 << 20)
    gate = Gate()
    body = b"z" * 300 * KiB

    async def test() -> None:
        holder, big = group(2, limits, gate)
        holder.inbox += post(b"h" * 80 * KiB)
        await pump([holder])
        big.inbox += post(body)
        await pump([big])
        assert not big.transport.reading  # the holder's request will give memory back: wait for it
        gate.answer()
        await pump([big])
        assert len(gate.seen) == 2 and bytes(gate.seen[1].body) == body
        gate.answer()
        await settle()
        assert [crc(x) for x in big.answers()] == [(200, zlib.crc32(body))]

    run(test)


def test_requests_waiting_in_the_pipeline_stay_charged():
    limits = HttpLimits(max_buffered_bytes=1 << 20)
    gate = Gate()

    async def test() -> None:
        (client,) = group(1, limits, gate)
        client.inbox += post(b"a" * 100 * KiB) + post(b"b" * 3000) + chunked(b"c" * 5000)
        await pump([client])
        assert len(gate.seen) == 1 and client.budget.used == 100 * KiB + 3000 + 5000
        gate.answer()
        await settle()
        assert client.budget.used == 100 * KiB + 3000 + 5000  # the first body: kept as the spare buffer
        for _ in range(2):
            gate.answer()
            await settle()
        client.connection.tick(client.now(SPARE_KEEP_S + 0.1))
        assert client.budget.used == 0 and len(client.answers()) == 3

    run(test)


def test_a_connection_stopped_for_memory_cannot_be_late():
    """Its body deadline does not run while the server does not read it; it starts again when it reads again."""
    limits = HttpLimits(max_buffered_bytes=100 * KiB, body_timeout_s=5, header_timeout_s=3)
    gate = Gate()

    async def test() -> None:
        holder, waiter = group(2, limits, gate)
        holder.inbox += post(b"h" * 90 * KiB)
        await pump([holder])
        wire = post(b"w" * 200 * KiB)
        waiter.inbox += wire[:-1000]  # all but the end: after memory frees, the client stalls
        await pump([waiter])
        assert not waiter.transport.reading
        waiter.connection.tick(waiter.now(100))
        await settle()
        assert not waiter.transport.closed and not waiter.answers()
        gate.answer()
        await pump([waiter])
        assert waiter.transport.reading and not waiter.inbox
        waiter.connection.tick(waiter.now(4))
        await settle()
        assert not waiter.answers()
        waiter.connection.tick(waiter.now(5.1))
        await settle()
        assert [s for s, _ in waiter.answers()] == [408] and waiter.transport.closed
        assert waiter.budget.used == 0 or waiter.budget.used == 90 * KiB  # the holder's spare at most

    run(test)


def test_idle_connection_stopped_for_memory_gets_its_idle_timeout_when_it_reads_again():
    limits = HttpLimits(max_buffered_bytes=100 * KiB, idle_timeout_s=5)
    gate = Gate()

    async def test() -> None:
        holder, other = group(2, limits, gate)
        holder.inbox += post(b"h" * 99 * KiB)
        await pump([holder])
        other.inbox += post(b"s" * 2000)  # a small body, read in one go past the budget: stop after it
        await pump([other])
        assert not other.transport.reading and len(gate.seen) == 2
        gate.answer(2)
        await settle()
        assert other.transport.reading and len(other.answers()) == 1
        other.connection.tick(other.now(5.1))
        assert other.transport.closed  # idle: closed at its idle timeout

    run(test)


def test_reads_are_small_while_memory_is_short():
    """200 connections send a 1 MiB body each while the budget is spent: each reads a few KiB, then waits; all
    complete, one after another, as memory frees."""
    limits = HttpLimits(max_buffered_bytes=512 * KiB)
    gate = Gate()
    count = 200

    async def test() -> None:
        holder, *clients = group(count + 1, limits, gate)
        holder.inbox += post(b"h" * 500 * KiB)
        await pump([holder])
        for i, client in enumerate(clients):
            client.inbox += post(i.to_bytes(4, "little") * (256 * KiB))
        await pump(clients)
        budget = holder.budget
        assert budget.waiting == count
        assert budget.used <= limits.max_buffered_bytes + count * TIGHT_READ
        for _ in range(count + 1):
            gate.answer()
            await pump(clients)
        assert budget.waiting == 0 and len(gate.seen) == count + 1
        gate.answer(count)
        await settle()
        for i, client in enumerate(clients):
            expected = zlib.crc32(i.to_bytes(4, "little") * (256 * KiB))
            assert [crc(x) for x in client.answers()] == [(200, expected)]
        assert budget.peak <= limits.max_buffered_bytes + (1 << 20) + count * TIGHT_READ

    run(test)


ENDINGS = ["complete", "eof_mid_body", "reset_mid_body", "body_timeout", "too_large", "too_large_chunked",
           "header_too_large", "handler_exception", "hang_up_in_handler", "hang_up_while_waiting",
           "hang_up_with_pipeline"]


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("size", [3000, 150 * KiB], ids=["small", "large"])
def test_the_counter_goes_back_to_zero_however_a_connection_ends(ending, size):
    limits = HttpLimits(max_buffered_bytes=160 * KiB, max_input_bytes=160 * KiB, body_timeout_s=5,
                        max_header_bytes=1000)
    gate = Gate()
    body = b"q" * size

    async def test() -> None:
        holder, client = group(2, limits, gate)
        budget = client.budget
        if ending == "hang_up_while_waiting":
            holder.inbox += post(b"h" * 159 * KiB)
            await pump([holder])
        wire = {
            "too_large": post(b"x" * (160 * KiB + 1)),
            "too_large_chunked": chunked(b"x" * (160 * KiB + 1)),
            "header_too_large": post(body) + get(pad_to=2000),
            "hang_up_with_pipeline": post(body) * 3,
        }.get(ending, post(body))
        if ending in ("eof_mid_body", "reset_mid_body", "body_timeout", "hang_up_while_waiting"):
            wire = wire[: len(wire) - size // 2]
        client.inbox += wire
        await pump([client], 7000)
        if ending == "hang_up_while_waiting":
            assert not client.transport.reading and budget.waiting == 1
        if ending in ("complete", "header_too_large"):
            gate.answer(len(gate.seen))
            await settle()
            assert client.answers()[0][0] == 200
        elif ending == "handler_exception":
            gate.fail()
            await settle()
            assert client.answers()[0][0] == 500
        elif ending == "body_timeout":
            client.connection.tick(client.now(5.1))
            await settle()
            assert [s for s, _ in client.answers()] == [408]
        elif ending.startswith("too_large"):
            assert [s for s, _ in client.answers()] == [413]
        if ending == "header_too_large":
            assert [s for s, _ in client.answers()] == [200, 431]
        client.connection.tick(client.now(SPARE_KEEP_S + 0.1))  # a spare buffer is dropped after idling
        client.hang_up(ConnectionResetError() if ending.startswith("reset") else None)
        await settle()
        holder.hang_up()
        gate.answer(len(gate.seen))
        await settle()
        assert budget.used == 0 and budget.waiting == 0

    run(test)


@pytest.mark.parametrize("seed", range(30))
def test_random_traffic_never_deadlocks_nor_leaks(seed):
    """Connections send random mixes of bodies (small, large, chunked, none) in random reads; some hang up midway,
    some handlers fail or take long. Every connection left open gets all its answers, memory stays within the
    budget plus one body plus the small reads, and the counter ends at zero."""
    rng = random.Random(seed)
    limits = HttpLimits(max_buffered_bytes=rng.choice([64, 256, 600]) * KiB, max_input_bytes=400 * KiB,
                        max_pipelined=4)
    gate = Gate()

    async def test() -> None:
        clients = group(rng.randint(2, 12), limits, gate)
        sent: dict[Client, list[int]] = {}
        for client in clients:
            bodies = []
            for _ in range(rng.randint(1, 5)):
                kind = rng.choice(["get", "small", "large", "chunked"])
                size = {"get": 0, "small": rng.randint(1, 60_000), "large": rng.randint(FIRST_BLOCK, 400 * KiB),
                        "chunked": rng.randint(1, 200_000)}[kind]
                body = rng.randbytes(size)
                client.inbox += {"get": lambda b: get(), "small": post, "large": post, "chunked": chunked}[kind](body)
                bodies.append(zlib.crc32(body))
            sent[client] = bodies
        gone = set(rng.sample(clients, rng.randint(0, len(clients) // 2)))
        budget = clients[0].budget
        bound = limits.max_buffered_bytes + limits.max_input_bytes + len(clients) * TIGHT_READ + 64 * KiB
        for _ in range(10_000):
            for client in clients:
                if client in gone and rng.random() < 0.05 and not client.transport.closed:
                    client.hang_up(rng.choice([None, ConnectionResetError()]))
                client.read_once(rng.choice([1000, 7000, 65536, 1 << 20]))
            if any(not f.done() for f in gate.held) and rng.random() < 0.5:
                (gate.fail if rng.random() < 0.1 else gate.answer)()
            await settle()
            assert budget.used <= bound
            if all(not c.inbox or c.transport.closed for c in clients) and not any(not f.done() for f in gate.held):
                break
        else:
            raise AssertionError("traffic did not finish: a deadlock")
        for client in clients:
            if client.transport.closed:
                continue
            answers = client.answers()
            assert len(answers) == len(sent[client]), seed
            for (status, content), expected in zip(answers, sent[client]):
                assert status == 500 or int(content) == expected
            client.hang_up()
        await settle()
        assert budget.used == 0 and budget.waiting == 0, seed

    run(test)
