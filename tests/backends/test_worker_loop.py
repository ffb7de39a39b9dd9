"""The worker loop against a real router, the worker in a thread of this process (as `Triton.bind` hosts it): the
credit window of a stream (it waits, still hearing CANCEL and STOP, while its consumers are a window behind), and
how the loop answers and reports callables that raise BaseExceptions."""

from __future__ import annotations

import asyncio
import os
import secrets
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pytriton.backends import worker
from pytriton.backends.spec import WorkerSpec
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.arena import our_segments
from pytriton.proxy.messages import RequestData, TensorData
from pytriton.proxy.router import ProxyRouter, WorkerGoneError, WorkerLink, response_slots

STREAM = TritonModelConfig(model_name="stream", inputs=[TensorSpec("N", "INT32", (1,))],
                           outputs=[TensorSpec("V", "INT32", (-1,))], decoupled=True)
UNARY = TritonModelConfig(model_name="unary", inputs=[TensorSpec("N", "INT32", (1,))],
                          outputs=[TensorSpec("V", "INT32", (-1,))])


class Replies:
    """A router Call that keeps every RESULT of one call (their response slots go back at once)."""

    def __init__(self, link: WorkerLink):
        self.link = link
        self.values: list[int] = []
        self.errors: list[str] = []
        self.final = asyncio.get_running_loop().create_future()
        self.gone: str | None = None

    def on_reply(self, message: Any, frames: list[Any]) -> None:
        for item in message.responses:
            self.values.append(len(item.outputs))
        if message.error:
            self.errors.append(message.error)
        self.link.release(response_slots(message))
        if message.final and not self.final.done():
            self.final.set_result(None)

    def on_gone(self, reason: str) -> None:
        self.gone = reason
        if not self.final.done():
            self.final.set_exception(WorkerGoneError(reason))

    async def until(self, count: int, timeout_s: float = 10.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while len(self.values) < count:
            assert asyncio.get_running_loop().time() < deadline, f"{len(self.values)} of {count} responses came"
            await asyncio.sleep(0.005)


def _n(value: int) -> RequestData:
    return RequestData([TensorData("N", "INT32", (1,), np.array([value], dtype=np.int32).tobytes())], [], {})


def run_worker(config: TritonModelConfig, fn: Callable, scenario: Callable) -> threading.Thread:
    """A router and a thread serving `fn` (stopped with its stop event); runs `scenario(router, link, stop)`."""

    async def main() -> threading.Thread:
        tag = secrets.token_hex(4)
        with tempfile.TemporaryDirectory() as run_dir:
            router = ProxyRouter(f"ipc://{run_dir}/w.sock", tag)
            link = router.add_link(b"m#0#x1", "m_0_0")
            spec = WorkerSpec(address=router.address, identity="m#0#x1", tag=tag, server_pid=os.getpid(),
                              inline_max=router.inline_max, config=config, watch="none")
            stop = threading.Event()
            thread = threading.Thread(target=worker.serve, args=(spec, fn, stop), daemon=True)
            thread.start()
            try:
                await asyncio.wait_for(link.hello, 10)
                await scenario(router, link, stop)
            finally:
                stop.set()
                await asyncio.get_running_loop().run_in_executor(None, thread.join, 10)
                router.close()
            assert list(our_segments(tag)) == []
            return thread

    return asyncio.run(main())


def _counting(closed: list[int], produced: list[int], size: int = 1) -> Callable:
    def fn(requests):
        try:
            for step in range(int(requests[0]["N"][0])):
                produced.append(step)
                yield [{"V": np.zeros(size, dtype=np.int32)}]
        finally:
            closed.append(len(produced))

    return fn


def test_a_stream_runs_a_window_ahead_of_its_credit_and_goes_on_as_credit_comes():
    closed: list[int] = []
    produced: list[int] = []

    async def scenario(router, link, stop):
        replies = Replies(link)
        call_id = router.submit(link, [_n(100)], replies, window=(8, 0))
        await replies.until(8)
        await asyncio.sleep(0.3)
        assert len(replies.values) == 8 and len(produced) == 8  # the generator waits, suspended
        router.credit(link, call_id, 4)
        await replies.until(12)
        await asyncio.sleep(0.2)
        assert len(replies.values) == 12
        router.credit(link, call_id, 100)
        await asyncio.wait_for(replies.final, 10)
        assert len(replies.values) == 100 and not replies.errors and closed == [100]

    run_worker(STREAM, _counting(closed, produced), scenario)


def test_a_stream_without_a_window_is_not_paced():
    async def scenario(router, link, stop):
        replies = Replies(link)
        router.submit(link, [_n(500)], replies)
        await asyncio.wait_for(replies.final, 10)
        assert len(replies.values) == 500

    run_worker(STREAM, _counting([], []), scenario)


def test_the_byte_window_holds_a_stream_of_large_responses_after_the_first():
    produced: list[int] = []

    async def scenario(router, link, stop):
        replies = Replies(link)
        call_id = router.submit(link, [_n(10)], replies, window=(64, 300_000))  # each response is 400 KB
        await replies.until(1)
        await asyncio.sleep(0.3)
        assert len(replies.values) == 1
        router.credit(link, call_id, 1)
        await replies.until(2)
        router.credit(link, call_id, 10)
        await asyncio.wait_for(replies.final, 10)
        assert len(replies.values) == 10

    run_worker(STREAM, _counting([], produced, size=100_000), scenario)


def test_a_stream_waiting_for_credit_hears_cancel_and_closes_its_generator():
    closed: list[int] = []

    async def scenario(router, link, stop):
        replies = Replies(link)
        call_id = router.submit(link, [_n(1000)], replies, window=(4, 0))
        await replies.until(4)
        router.cancel(link, call_id)
        await asyncio.wait_for(replies.final, 10)
        assert len(replies.values) == 4 and closed == [4]
        again = Replies(link)  # the worker serves on
        router.submit(link, [_n(3)], again, window=(4, 0))
        await asyncio.wait_for(again.final, 10)
        assert len(again.values) == 3

    run_worker(STREAM, _counting(closed, []), scenario)


@pytest.mark.parametrize("how", ["STOP", "stop event"])
def test_a_stream_waiting_for_credit_ends_on_stop(how):
    closed: list[int] = []

    async def scenario(router, link, stop):
        replies = Replies(link)
        router.submit(link, [_n(1000)], replies, window=(4, 0))
        await replies.until(4)
        if how == "STOP":
            router.stop_worker(link)
        else:
            stop.set()
        await asyncio.wait_for(replies.final, 10)
        assert closed == [4]

    thread = run_worker(STREAM, _counting(closed, []), scenario)
    assert not thread.is_alive()


def _raises(exc: BaseException, gate: threading.Event | None = None) -> Callable:
    """Raises `exc` for N=2 (once `gate` is set, if given), else answers V=[0]."""

    def fn(requests):
        if int(requests[0]["N"][0]) == 2:
            if gate is not None:
                gate.wait(10)
            raise exc
        return [{"V": np.zeros(1, dtype=np.int32)}]

    return fn


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()], ids=["SystemExit", "KeyboardInterrupt"])
def test_a_callable_that_exits_answers_its_call_and_the_worker_says_it_stopped(exc):
    async def scenario(router, link, stop):
        fatal: list[str] = []
        link.on_fatal = fatal.append
        replies = Replies(link)
        router.submit(link, [_n(2)], replies)
        await asyncio.wait_for(replies.final, 10)
        assert replies.errors == [f"{type(exc).__name__}: {exc}"]
        deadline = asyncio.get_running_loop().time() + 10
        while not fatal and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert fatal == [f"{type(exc).__name__}: {exc}"]

    thread = run_worker(UNARY, _raises(exc), scenario)
    assert not thread.is_alive()


class _Interrupted(BaseException):
    pass


def test_a_callable_raising_another_base_exception_answers_its_call_and_the_loop_goes_on():
    async def scenario(router, link, stop):
        fatal: list[str] = []
        link.on_fatal = fatal.append
        failed, served = Replies(link), Replies(link)
        router.submit(link, [_n(2)], failed)
        router.submit(link, [_n(1)], served)
        await asyncio.wait_for(served.final, 10)
        assert failed.errors == ["_Interrupted: not now"] and served.values == [1] and not fatal

    run_worker(UNARY, _raises(_Interrupted("not now")), scenario)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_fatal_after_hello_drops_a_link_without_a_handler():
    submitted = threading.Event()  # the worker exits only once both calls are sent (else the second finds it gone)

    async def scenario(router, link, stop):
        pending = Replies(link)
        router.submit(link, [_n(2)], Replies(link))
        router.submit(link, [_n(3)], pending)  # was to run after the one that exits: never
        submitted.set()
        with pytest.raises(WorkerGoneError, match="SystemExit: 3"):
            await asyncio.wait_for(pending.final, 10)
        assert link.closed

    thread = run_worker(UNARY, _raises(SystemExit(3), submitted), scenario)
    assert not thread.is_alive()
