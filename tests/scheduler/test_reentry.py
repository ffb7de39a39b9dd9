"""The scheduler over fake instances: a call back into a model on its own call chain (a job with a Reentry) runs only
on an idle instance that does not wait for it, or fails at once naming the cycle; the pending count includes requests
pipelined behind a running execution; a model whose every instance runs an execution without progress while requests
wait reports not ready."""

from __future__ import annotations

import asyncio

import pytest

from pytriton.exceptions import ServerError, Status
from pytriton.scheduler.dispatcher import BatchPolicy, ModelScheduler
from pytriton.scheduler.job import DONE, Reentry
from tests.scheduler.fakes import FakeInstance, make_job

CYCLE = "BLS call cycle: 'a' -> 'b' -> 'a'"
HOUR_NS = 3600 * 10**9


def run(coroutine):
    return asyncio.run(coroutine)


def reentrant(payload: str, *blocked: str):
    job, ended = make_job(payload)
    job.reentry = Reentry(frozenset(blocked), CYCLE)
    return job, ended


def test_a_call_back_into_the_only_instance_fails_at_once():
    async def main():
        scheduler = ModelScheduler("a")
        instance = FakeInstance("a_0_0")
        scheduler.add_instance(instance)
        outer, _ = make_job("outer")
        scheduler.submit(outer)  # the execution that (through b) makes the call back
        job, _ = reentrant("back", "a_0_0")
        with pytest.raises(ServerError) as info:
            scheduler.submit(job)
        assert info.value.status == Status.UNAVAILABLE
        assert str(info.value.message) == (
            f"{CYCLE}: model 'a' has no free instance (instance 'a_0_0' waits for this call); a call back into a model "
            "on its own call chain runs only on an idle instance, it does not wait for one")
        # not queued, and not pipelined behind the execution that waits for it
        assert [e.payloads for e in instance.executions] == [["outer"]] and scheduler.pending_count == 0
        instance.executions[0].reply()
        await outer.future

    run(main())


def test_it_runs_on_an_idle_instance_that_does_not_wait_for_it():
    async def main():
        scheduler = ModelScheduler("a")
        other, waiting = FakeInstance("a_0_1"), FakeInstance("a_0_0")
        scheduler.add_instance(other)
        scheduler.add_instance(waiting)  # the most recently freed: a plain job would go there first
        job, ended = reentrant("back", "a_0_0")
        scheduler.submit(job)
        assert [e.payloads for e in other.executions] == [["back"]] and not waiting.executions
        other.executions[0].reply()
        await job.future
        assert ended == [1] and job.state == DONE

    run(main())


def test_under_preserve_ordering_a_call_back_is_answered_before_the_job_that_waits_for_it():
    async def main():
        scheduler = ModelScheduler("a", BatchPolicy(4), preserve_ordering=True)
        other, waiting = FakeInstance("a_0_1"), FakeInstance("a_0_0")
        scheduler.add_instance(other)
        scheduler.add_instance(waiting)
        outer, _ = make_job("outer")
        scheduler.submit(outer)
        assert waiting.executions[0].payloads == ["outer"]
        job, _ = reentrant("back", "a_0_0")
        scheduler.submit(job)
        other.executions[0].reply()
        await asyncio.wait_for(job.future, 5)  # not held behind "outer", which waits for it
        waiting.executions[0].reply()
        await outer.future

    run(main())


def test_a_busy_instance_is_no_free_instance_even_with_room_for_a_pipelined_call():
    async def main():
        scheduler = ModelScheduler("a", pipeline_depth=2)
        waiting, busy = FakeInstance("a_0_0"), FakeInstance("a_0_1")
        scheduler.add_instance(waiting)
        scheduler.add_instance(busy)
        first, _ = make_job("first")
        second, _ = make_job("second")
        scheduler.submit(first)
        scheduler.submit(second)  # one execution on each
        job, _ = reentrant("back", "a_0_0")
        with pytest.raises(ServerError, match=r"\(instance 'a_0_0' waits for this call; 1 other busy\)"):
            scheduler.submit(job)
        assert len(waiting.executions) == 1 and len(busy.executions) == 1
        for instance in (waiting, busy):
            instance.executions[0].reply()
        await asyncio.gather(first.future, second.future)

    run(main())


def test_the_pending_count_includes_what_waits_behind_a_running_execution():
    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=2)
        instance = FakeInstance("m_0_0")
        scheduler.add_instance(instance)
        jobs = [make_job(i)[0] for i in range(3)]
        for job in jobs:
            scheduler.submit(job)
        assert scheduler.queue_size == 1 and scheduler.pending_count == 2  # one queued, one pipelined
        assert len(scheduler.running()) == 1
        scheduler.withdraw(jobs[1])  # its caller left: it no longer waits
        assert scheduler.pending_count == 1
        for _ in range(3):  # (the fake instance runs the withdrawn one too)
            instance.running[0].reply()
        assert scheduler.pending_count == 0 and scheduler.running() == []
        await asyncio.gather(jobs[0].future, jobs[2].future)

    run(main())


def test_a_model_with_every_instance_stalled_while_requests_wait_is_not_ready():
    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=1, stall_s=3600)
        a, b = FakeInstance("m_0_0"), FakeInstance("m_0_1")
        scheduler.add_instance(a)
        scheduler.add_instance(b)
        jobs = [make_job(i, stream=True)[0] for i in range(3)]
        scheduler.submit(jobs[0])
        scheduler.submit(jobs[1])
        running = {e.instance.label: e for e in scheduler.running()}
        for execution in running.values():
            execution.progress_ns -= 2 * HOUR_NS  # (as if two hours had passed without progress)
        assert scheduler.ready  # stalled, but nobody waits
        assert scheduler.stalled_ns() >= 2 * HOUR_NS
        scheduler.submit(jobs[2])
        assert scheduler.pending_count == 1 and not scheduler.ready
        on_b = jobs[0] if b.executions[0].payloads == [0] else jobs[1]
        b.executions[0].reply(final=False)  # a streamed response is progress
        assert scheduler.ready
        running["m_0_1"].progress_ns -= 2 * HOUR_NS
        assert scheduler.ready  # a stream whose reader has not taken its response yet waits for it: not stalled
        await on_b.next()
        assert not scheduler.ready
        a.executions[0].reply()  # an answer: a_0_0 takes the waiting request
        assert scheduler.pending_count == 0 and scheduler.ready
        b.executions[0].reply()
        a.running[0].reply()

    run(main())


def test_stall_detection_off():
    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=1)
        instance = FakeInstance("m_0_0")
        scheduler.add_instance(instance)
        first, second = make_job(1)[0], make_job(2)[0]
        scheduler.submit(first)
        scheduler.submit(second)
        scheduler.running()[0].progress_ns -= 2 * HOUR_NS
        assert scheduler.pending_count == 1 and scheduler.ready
        instance.running[0].reply()
        instance.running[0].reply()
        await asyncio.gather(first.future, second.future)

    run(main())
