"""`HttpConnection` with a `begin`: requests answered from a callback (no handler task), mixed with handled ones,
in order; a request's body charge goes back exactly once whether it is answered, cancelled or its connection lost."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

from pytriton.frontend.http1 import HttpLimits, HttpRequest, HttpResponse, error_response
from tests.frontend.http1._fake import Client, get, post, run, settle


class Pending:
    """What `begin` returns for POST /p: answered once the test sets its future."""

    def __init__(self, request: HttpRequest):
        self.request = request
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.cancels = 0
        self.answers = 0

    def watch(self, callback) -> None:
        self.future.add_done_callback(callback)

    def answer(self) -> HttpResponse:
        self.answers += 1
        if isinstance(self.future.result(), Exception):
            raise self.future.result()
        return HttpResponse(200, [b"begun " + bytes(self.request.body)])

    def cancel(self) -> None:
        self.cancels += 1
        if not self.future.done():
            self.future.cancel()


class Begin:
    def __init__(self) -> None:
        self.started: list[Pending] = []

    def __call__(self, request: HttpRequest) -> HttpResponse | Pending | None:
        if request.path == "/p":
            pending = Pending(request)
            self.started.append(pending)
            return pending
        if request.path == "/now":
            return error_response(400, "answered at once")
        if request.path == "/bug":
            raise RuntimeError("a bug in begin")
        return None  # the handler answers


def test_begun_and_handled_requests_answer_in_request_order():
    async def test() -> None:
        begin = Begin()
        client = Client(HttpLimits(), begin=begin)
        client.send(post(b"one") + get("/h") + post(b"two") + get("/now") + post(b"three"))
        await settle()
        assert len(begin.started) == 1 and not client.answers()  # the first waits; nothing passes it
        begin.started[0].future.set_result(None)
        await settle()
        # the handled GET ran as a task, then the next begun request waits
        assert [s for s, _ in client.answers()] == [200, 200]
        assert len(begin.started) == 2
        begin.started[1].future.set_result(None)
        await settle()
        assert len(begin.started) == 3
        begin.started[2].future.set_result(None)
        await settle()
        answers = client.answers()
        assert answers[0] == (200, b"begun one") and answers[1] == (200, b"0")
        assert answers[2] == (200, b"begun two")
        assert answers[3][0] == 400 and json.loads(answers[3][1]) == {"error": "answered at once"}
        assert answers[4] == (200, b"begun three")
        assert client.budget.used == 0 and client.connection.task is None
        assert all(p.answers == 1 and p.cancels == 0 for p in begin.started)

    run(test)


def test_connection_lost_while_begun_cancels_and_releases_once():
    async def test() -> None:
        begin = Begin()
        client = Client(HttpLimits(), begin=begin)
        client.send(post(b"x" * 5000) + post(b"queued"))
        await settle()
        pending = begin.started[0]
        assert client.budget.used == 5000 + len(b"queued")  # both bodies charged while they wait
        client.hang_up()
        assert pending.cancels == 1 and pending.future.cancelled()
        assert client.budget.used == 0
        await settle()
        assert pending.answers == 0 and pending.cancels == 1 and client.budget.used == 0
        assert not client.answers() and len(begin.started) == 1  # the queued request never began

    run(test)


def test_a_lost_connection_keeps_no_reference_to_its_begun_request():
    """A closed connection may wait a long time for the cyclic collector (the server freezes its start-up heap and
    collects rarely): once it is lost, nothing it holds refers to a request still under way, whose body the budget
    no longer counts (a hang-up storm kept ~170 such 1 MiB bodies past a 64 MiB budget)."""

    class Leaving(Pending):  # keeps no reference to its request, as the core's answer keeps none once cancelled
        def __init__(self) -> None:
            super().__init__(HttpRequest("POST", "/p", "", {}, b""))

    async def test() -> None:
        seen: list[HttpRequest] = []

        def begin(request: HttpRequest) -> Leaving:
            seen.append(request)
            return Leaving()

        client = Client(HttpLimits(), begin=begin)
        client.send(post(b"x" * 100_000))
        await settle()
        [request] = seen
        client.hang_up()
        await settle()
        assert client.budget.used == 0 and client.connection.task is None
        body = request.body
        assert gc.get_referrers(body) == [request]  # (a coroutine's frame is no gc referrer while it runs)
        others = gc.get_referrers(request)
        others.remove(seen)
        assert others == []

    run(test)


def test_connection_lost_after_the_answer_came_before_its_callback():
    """The job is done (its callback scheduled) when the connection goes: cancelled once, released once, the
    callback does nothing."""

    async def test() -> None:
        begin = Begin()
        client = Client(HttpLimits(), begin=begin)
        client.send(post(b"y" * 100))
        await settle()
        pending = begin.started[0]
        pending.future.set_result(None)  # its done callback is due, not run
        client.hang_up()
        assert pending.cancels == 1 and client.budget.used == 0
        await settle()
        assert pending.answers == 0 and pending.cancels == 1 and client.budget.used == 0
        assert not client.answers()

    run(test)


def test_an_answer_after_its_connection_loss_is_not_cancelled_twice():
    async def test() -> None:
        begin = Begin()
        client = Client(HttpLimits(), begin=begin)
        client.send(post(b"z"))
        await settle()
        pending = begin.started[0]
        pending.future.set_result(None)
        await settle()
        assert client.answers() == [(200, b"begun z")]
        client.hang_up()  # nothing is under way any more
        assert pending.cancels == 0 and pending.answers == 1 and client.budget.used == 0

    run(test)


def test_a_bug_in_begin_or_in_the_answer_is_a_500_and_the_connection_goes_on():
    async def test() -> None:
        begin = Begin()
        client = Client(HttpLimits(), begin=begin)
        client.send(get("/bug") + post(b"a"))
        await settle()
        begin.started[0].future.set_result(RuntimeError("a bug in the answer"))
        await settle()
        client.send(post(b"b"))
        await settle()
        begin.started[1].future.set_result(None)
        await settle()
        answers = client.answers()
        assert [s for s, _ in answers] == [500, 500, 200]
        assert "a bug in begin" in json.loads(answers[0][1])["error"]
        assert "a bug in the answer" in json.loads(answers[1][1])["error"]
        assert answers[2] == (200, b"begun b")
        assert client.budget.used == 0 and not client.transport.closed

    run(test)


def test_connection_close_after_a_begun_answer():
    async def test() -> None:
        begin = Begin()
        client = Client(HttpLimits(), begin=begin)
        client.send(post(b"last", extra="Connection: close\r\n"))
        await settle()
        begin.started[0].future.set_result(None)
        await settle()
        assert client.answers() == [(200, b"begun last")] and client.transport.closed
        assert b"Connection: close" in bytes(client.transport.written)

    run(test)


def test_refusal_while_begun_waits_goes_after_the_answer():
    """A request refused while a begun one waits (here: too large) is answered after it, then the connection
    closes."""

    async def test() -> None:
        begin = Begin()
        client = Client(HttpLimits(max_input_bytes=10), begin=begin)
        client.send(post(b"ok") + post(b"x" * 11))
        await settle()
        assert not client.answers()
        begin.started[0].future.set_result(None)
        await settle()
        assert [s for s, _ in client.answers()] == [200, 413] and client.transport.closed
        assert client.budget.used == 0

    run(test)


def test_kept_names_targets_and_heads_stay_bounded_and_right():
    """Header names, request targets and answer heads are kept for reuse, within their bounds, and what is kept reads
    as what is built."""
    from pytriton.frontend.http1 import messages, reader

    async def test() -> None:
        client = Client(HttpLimits(max_header_count=10_000, max_header_bytes=1 << 20))
        for i in range(reader.NAMES_KEPT + 50):
            client.send(f"GET /t{i}?q={i} HTTP/1.1\r\nHost: x\r\nX-Name-{i}: v\r\n\r\n".encode())
            await settle()
            assert len(reader._names) <= reader.NAMES_KEPT and len(reader._targets) <= reader.TARGETS_KEPT
        for i in (0, reader.NAMES_KEPT + 49):
            request = client.requests[i]
            assert request.headers == {"host": "x", f"x-name-{i}": "v"}
            assert (request.path, request.query) == (f"/t{i}", f"q={i}")
        client.send(b"GET /t0?q=0 HTTP/1.1\r\nHOST: y\r\n\r\n")  # kept target, another spelling of a kept name
        await settle()
        assert client.requests[-1].headers == {"host": "y"} and client.requests[-1].query == "q=0"

        class Transport:
            def __init__(self) -> None:
                self.written: list[bytes] = []

            def write(self, data: bytes) -> None:
                self.written.append(bytes(data))

        for i in range(messages.HEADS_KEPT + 20):
            transport = Transport()
            messages.write_response(transport, HttpResponse(200, [b"x" * (i % 7)], [("X-I", str(i))]),  # type: ignore
                                    keep_alive=i % 2 == 0, head=False)
            expected = (f"HTTP/1.1 200 OK\r\nContent-Length: {i % 7}\r\nX-I: {i}\r\n"
                        + ("" if i % 2 == 0 else "Connection: close\r\n") + "\r\n").encode() + b"x" * (i % 7)
            assert b"".join(transport.written) == expected
            assert len(messages._heads) <= messages.HEADS_KEPT

    run(test)
