"""What one request leaves behind is freed by reference counting alone: an execution that ended, its jobs, their
futures and results form no reference cycle (the cyclic collector would otherwise scan every young object many times a
second at high concurrency, and hold the results' buffers until it ran), and a job's `watch` callback answers in the
loop pass the result arrives in."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from pytriton.scheduler.dispatcher import BatchPolicy, ModelScheduler
from pytriton.scheduler.job import ExecutionStats, Job
from tests.scheduler.fakes import FakeInstance, FakeResult, turns


class _Call:
    """An instance's control of one execution, holding its sink as a worker call does (a cycle while it runs)."""

    def __init__(self, sink: Any, payloads: list[Any]):
        self.sink = sink
        self.payloads = payloads

    def cancel(self) -> None:
        pass

    def consumed(self, count: int) -> None:
        pass


class _Instance:
    """Keeps only its running calls (as the router keeps a worker's calls until their final answer)."""

    label = "i"

    def __init__(self) -> None:
        self.calls: list[_Call] = []

    def execute(self, payloads: list[Any], sink: Any) -> _Call:
        self.calls.append(_Call(sink, payloads))
        return self.calls[-1]

    def answer(self, fail: bool = False) -> None:
        while self.calls:  # (the first job starts alone, the others together once it ended)
            call = self.calls.pop(0)
            if fail:
                call.sink.fail(RuntimeError("gone"))
            else:
                call.sink.deliver([FakeResult(p) for p in call.payloads], ExecutionStats(0, 1, 2, 3))


def test_an_ended_execution_its_jobs_and_results_leave_no_cyclic_garbage():
    async def main() -> tuple[list[Any], list[str]]:
        answered: list[Any] = []
        scheduler = ModelScheduler("m", BatchPolicy(max_batch_size=8))
        instance = _Instance()
        scheduler.add_instance(instance)
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for batch in range(3):
                for n in range(4):
                    job = Job(f"{batch}.{n}")
                    job.watch(lambda future: answered.append(future.result().result.value))
                    scheduler.submit(job)
                await turns()
                instance.answer()
                await turns()
            job = Job("failing")
            job.watch(lambda future: answered.append(type(future.exception()).__name__))
            scheduler.submit(job)
            await turns()
            instance.answer(fail=True)
            del job
            gc.collect()
            return answered, sorted({type(o).__name__ for o in gc.garbage})
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()

    answered, garbage = asyncio.run(main())
    assert garbage == [], garbage
    assert len(answered) == 13 and answered[-1] == "RuntimeError"


def test_watch_answers_at_once_not_when_cancelled_and_a_done_future_from_a_callback():
    async def main() -> None:
        calls: list[str] = []
        scheduler = ModelScheduler("m", BatchPolicy(max_batch_size=8))
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        answered, cancelled = Job("a"), Job("c")
        answered.watch(lambda _: calls.append("a"))
        cancelled.watch(lambda _: calls.append("c"))
        scheduler.submit(answered)
        scheduler.submit(cancelled)
        assert cancelled.future is not None
        cancelled.future.cancel()  # (the caller left: UnaryCall.cancel)
        scheduler.withdraw(cancelled)
        while instance.running:
            instance.running[0].reply()
        assert calls == ["a"]  # in the pass the result came in, before any other callback ran
        await turns()
        assert calls == ["a"]  # the cancelled one is never answered

        done = Job("d")
        assert done.future is not None
        done.future.set_result(None)  # type: ignore[arg-type]
        done.watch(lambda _: calls.append("d"))
        assert calls == ["a"]
        await turns()
        assert calls == ["a", "d"]

    asyncio.run(main())


def test_a_failing_watch_callback_does_not_keep_the_other_jobs_of_its_batch_from_their_answers(caplog):
    async def main() -> list[str]:
        calls: list[str] = []
        scheduler = ModelScheduler("m", BatchPolicy(max_batch_size=8))
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        jobs = [Job(n) for n in range(3)]

        def broken(_: Any) -> None:
            raise RuntimeError("a bug in an answer")

        jobs[0].watch(broken)
        jobs[1].watch(lambda _: calls.append("1"))
        jobs[2].watch(lambda _: calls.append("2"))
        for job in jobs:
            scheduler.submit(job)
        await turns()
        while instance.running:
            instance.running[0].reply()
        return calls

    assert asyncio.run(main()) == ["1", "2"]
    assert "a job's done callback failed" in caplog.text
