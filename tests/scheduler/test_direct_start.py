"""Attacks on the direct start of `ModelScheduler.submit` (no batcher, no queue policy: a job starts without passing
through the queue when an instance has room): ordering under preserve_ordering, a caller that leaves at once, an
instance that fails at start, re-entrant submits, and models that must keep the queue."""

from __future__ import annotations

import asyncio
from typing import Any

from pytriton.exceptions import ServerError
from pytriton.scheduler.dispatcher import BatchPolicy, ModelScheduler
from pytriton.scheduler.job import DONE
from pytriton.scheduler.queue_policy import LevelPolicy, QueueRules
from tests.scheduler.fakes import FakeInstance, make_job, turns


def test_preserve_ordering_holds_a_later_answer_of_a_direct_start():
    async def main():
        scheduler = ModelScheduler("m", preserve_ordering=True)
        a, b = FakeInstance("a"), FakeInstance("b")
        scheduler.add_instance(a)
        scheduler.add_instance(b)
        first, second = make_job(1)[0], make_job(2)[0]
        scheduler.submit(first)
        scheduler.submit(second)
        assert scheduler.queue_size == 0 and len(a.executions) + len(b.executions) == 2  # both started at once
        late = next(e for e in a.executions + b.executions if e.payloads == [2])
        early = next(e for e in a.executions + b.executions if e.payloads == [1])
        late.reply()
        await turns()
        assert not second.future.done()  # held behind the first
        early.reply()
        assert (await first.future).result.value == 1 and (await second.future).result.value == 2
        # a first job withdrawn right after its start does not hold the second back
        third, fourth = make_job(3)[0], make_job(4)[0]
        scheduler.submit(third)
        scheduler.submit(fourth)
        third.future.cancel()
        scheduler.withdraw(third)
        next(e for e in a.executions + b.executions if e.payloads == [4]).reply()
        assert (await fourth.future).result.value == 4
        (result,) = next(e for e in a.executions + b.executions if e.payloads == [3]).reply()
        assert result.releases == 1

    asyncio.run(main())


def test_a_caller_that_leaves_at_once_frees_the_instance_for_the_next_direct_start():
    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=1)
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        for index in range(3):
            job, ended = make_job(index)
            scheduler.submit(job)
            job.future.cancel()
            scheduler.withdraw(job)
            scheduler.withdraw(job)  # (twice: once is what counts)
            assert len(instance.executions) == index + 1  # started directly: the instance was free
            (result,) = instance.executions[index].reply()
            assert result.releases == 1 and ended == [1] and job.state == DONE
        assert scheduler.queue_size == 0 and scheduler.executions_in_flight == 0

    asyncio.run(main())


class FailingAtStart(FakeInstance):
    """An instance whose execute fails with an ordinary error (e.g. the request arena is full)."""

    def execute(self, payloads: list[Any], sink: Any):
        raise RuntimeError("request arena full")


def test_an_instance_failing_at_start_fails_only_that_job_and_stays():
    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=1)
        scheduler.add_instance(FailingAtStart("f"))
        job, ended = make_job("a")
        scheduler.submit(job)
        try:
            await job.future
        except Exception as exc:  # noqa: BLE001
            assert "request arena full" in str(exc)
        else:
            raise AssertionError("the job should have failed")
        assert ended == [1] and scheduler.executions_in_flight == 0
        again, _ = make_job("b")
        scheduler.submit(again)  # the instance has room again
        try:
            await again.future
        except Exception as exc:  # noqa: BLE001
            assert "request arena full" in str(exc)

    asyncio.run(main())


def test_a_submit_from_a_delivery_callback_keeps_the_order():
    """A caller whose job's answer arrives submits its next job from the delivery (the future's callbacks run later;
    the job's on_finish runs in the delivery): it starts after the jobs that waited before it."""

    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=1)
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        first, _ = make_job("first")
        later: list[Any] = []
        first.on_finish(lambda: (later.append(make_job("from-callback")[0]), scheduler.submit(later[-1])))
        scheduler.submit(first)
        waiting, _ = make_job("waiting")
        scheduler.submit(waiting)
        assert scheduler.queue_size == 1
        instance.executions[0].reply()
        assert [e.payloads for e in instance.executions[1:]] == [["waiting"]]
        instance.executions[1].reply()
        assert instance.executions[2].payloads == ["from-callback"]
        instance.executions[2].reply()
        await later[0].future

    asyncio.run(main())


def test_models_with_a_batcher_or_a_queue_policy_queue_their_jobs():
    async def main():
        rules = QueueRules(2, 2, LevelPolicy(), {})
        for scheduler in (ModelScheduler("b", BatchPolicy(4, 100_000)), ModelScheduler("q", queueing=rules)):
            assert not scheduler._direct
        scheduler = ModelScheduler("q", pipeline_depth=1, queueing=QueueRules(2, 2, LevelPolicy(max_queue_size=1), {}))
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        jobs = [make_job(i)[0] for i in range(4)]
        for job in jobs[:2]:  # one runs, one waits
            scheduler.submit(job)
        assert len(instance.executions) == 1 and scheduler.queue_size == 1
        for job in jobs[2:]:  # the queue is full: refused, as the policy says (never started directly)
            try:
                scheduler.submit(job)
            except ServerError as exc:
                assert "queue" in exc.message.lower()
            else:
                raise AssertionError("a full queue took a job")
        while instance.running:
            instance.running[0].reply()
            await turns()

    asyncio.run(main())
