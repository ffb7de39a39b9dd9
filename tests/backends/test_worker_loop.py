"""The worker loop against a real router, the worker in a thread of this process (as `Triton.bind` hosts it): the
credit window of a stream (it waits, still hearing CANCEL and STOP, while its consumers are a window behind), and
how the loop answers and reports callables that raise BaseExceptions."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import numpy as np
import pytest

from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.messages import RequestData, TensorData
from pytriton.proxy.router import WorkerGoneError
from tests.backends.worker_thread import Replies, run_worker

STREAM = TritonModelConfig(model_name="stream", inputs=[TensorSpec("N", "INT32", (1,))],
                           outputs=[TensorSpec("V", "INT32", (-1,))], decoupled=True)
UNARY = TritonModelConfig(model_name="unary", inputs=[TensorSpec("N", "INT32", (1,))],
                          outputs=[TensorSpec("V", "INT32", (-1,))])


def _n(value: int) -> RequestData:
    return RequestData([TensorData("N", "INT32", (1,), np.array([value], dtype=np.int32).tobytes())], [], {})


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
