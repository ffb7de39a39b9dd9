"""The scheduler over fake instances: dispatch, pipelining, batching, cancellation, deaths, timeouts."""

from __future__ import annotations

import asyncio

import pytest

from pytriton.exceptions import ServerError, Status
from pytriton.scheduler.dispatcher import BatchPolicy, ModelScheduler
from pytriton.scheduler.job import DONE
from tests.scheduler.fakes import FakeInstance, make_job, turns


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_job_runs_alone_without_batching_and_its_result_reaches_the_caller():
    async def main():
        scheduler = ModelScheduler("m")
        instance = FakeInstance("m_0_0")
        scheduler.add_instance(instance)
        job, ended = make_job("a")
        scheduler.submit(job)
        (execution,) = instance.executions
        assert execution.payloads == ["a"]
        (result,) = execution.reply()
        delivery = await job.future
        assert delivery.result is result and delivery.final
        assert ended == [1] and job.state == DONE
        assert scheduler.queue_size == 0 and scheduler.executions_in_flight == 0

    run(main())


def test_pipelining_gives_an_instance_two_executions_and_prefers_idle_instances():
    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=2)
        a, b = FakeInstance("a"), FakeInstance("b")
        scheduler.add_instance(a)
        scheduler.add_instance(b)
        jobs = [make_job(i)[0] for i in range(5)]
        for job in jobs:
            scheduler.submit(job)
        # both instances get one before either gets a second; the fifth waits
        assert len(a.executions) == 2 and len(b.executions) == 2
        assert scheduler.queue_size == 1
        a.executions[0].reply()
        assert len(a.executions) == 3 and scheduler.queue_size == 0
        for instance in (a, b):
            for execution in instance.running:
                execution.reply()
        for job in jobs:
            await job.future
        assert scheduler.executions_in_flight == 0

    run(main())


def test_dynamic_batching_takes_up_to_max_batch_size_of_matching_jobs():
    async def main():
        scheduler = ModelScheduler("m", BatchPolicy(max_batch_size=4))
        instance = FakeInstance("i")
        jobs = [make_job(i, batch_size=1, signature="x")[0] for i in range(3)]
        jobs += [make_job(9, batch_size=2, signature="y")[0]]
        jobs += [make_job(i, batch_size=3, signature="x")[0] for i in range(2)]
        for job in jobs:
            scheduler.submit(job)
        scheduler.add_instance(instance)
        assert [e.payloads for e in instance.executions] == [[0, 1, 2]]  # signature y ends the batch
        instance.executions[0].reply()
        assert instance.executions[1].payloads == [9]
        instance.executions[1].reply()
        assert instance.executions[2].payloads == [0]  # 3 + 3 > 4
        instance.executions[2].reply()
        instance.executions[3].reply()
        results = [await job.future for job in jobs]
        assert [r.stats.batch_size for r in results] == [3, 3, 3, 2, 3, 3]

    run(main())


def test_queue_delay_waits_for_a_preferred_batch_size():
    async def main():
        scheduler = ModelScheduler("m", BatchPolicy(8, max_queue_delay_us=10_000_000, preferred_batch_sizes=(2,)))
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        first, _ = make_job(1)
        scheduler.submit(first)
        await turns()
        assert instance.executions == []  # waits up to 10 s for a second request
        second, _ = make_job(2)
        scheduler.submit(second)
        assert [e.payloads for e in instance.executions] == [[1, 2]]  # a preferred size starts at once
        instance.executions[0].reply()
        await first.future

    run(main())


def test_a_job_that_cannot_join_the_batch_starts_it_without_the_queue_delay():
    # As Triton's dynamic batcher (its qa/L0_optional_input): a request whose inputs differ from the waiting batch's
    # ends that batch, which is sent at once; the newcomer then waits for its own delay.
    async def main():
        scheduler = ModelScheduler("m", BatchPolicy(4, max_queue_delay_us=10_000_000, preferred_batch_sizes=(4,)))
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        jobs = [make_job(i, signature=signature)[0] for i, signature in enumerate("xxy")]
        scheduler.submit(jobs[0])
        scheduler.submit(jobs[1])
        await turns()
        assert instance.executions == []  # two of the same kind wait for more
        scheduler.submit(jobs[2])
        assert [e.payloads for e in instance.executions] == [[0, 1]]  # the other kind closes their batch
        instance.executions[0].reply()
        await turns()
        assert len(instance.executions) == 1  # the newcomer, alone, waits for its own delay
        scheduler.submit(make_job(3, signature="y")[0])
        scheduler.submit(later := make_job(4, signature="x")[0])
        assert [e.payloads for e in instance.executions[1:]] == [[2, 3]]
        for execution in instance.executions[1:]:
            execution.reply()
        await jobs[2].future
        assert later.state != DONE

    run(main())


def test_a_preferred_batch_the_queue_holds_starts_cut_at_its_size():
    # As Triton's dynamic batcher (its qa/L0_model_queue test_priority_levels): before the queue delay is over, the
    # largest preferred size a prefix of the queue reaches starts at once, cut there; the rest waits for its delay.
    async def main():
        scheduler = ModelScheduler("m", BatchPolicy(32, max_queue_delay_us=10_000_000, preferred_batch_sizes=(4, 8)))
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        first, _ = make_job(1, batch_size=3)
        scheduler.submit(first)
        scheduler.submit(make_job(2, batch_size=2)[0])  # 3, 5: no preferred size
        await turns()
        assert instance.executions == []
        scheduler.submit(make_job(3, batch_size=3)[0])  # 3, 5, 8: a preferred size
        assert [e.payloads for e in instance.executions] == [[1, 2, 3]]
        instance.executions[0].reply()
        await first.future
        jobs = [make_job(i, batch_size=2)[0] for i in range(4, 7)]  # 2, 4, 6
        for job in jobs:
            scheduler.submit(job)
        assert [e.payloads for e in instance.executions[1:]] == [[4, 5]]  # cut at 4, not the 6 queued
        instance.executions[1].reply()
        await jobs[1].future
        assert len(instance.executions) == 2  # the third waits for the delay
        # queued before an instance is there: 12 past the largest preferred size, cut where the batch passes 8
        later = ModelScheduler("m", BatchPolicy(32, max_queue_delay_us=10_000_000, preferred_batch_sizes=(4, 8)))
        many = [make_job(i, batch_size=1)[0] for i in range(12)]
        for job in many:
            later.submit(job)
        idle = FakeInstance("j")
        later.add_instance(idle)
        assert [e.payloads for e in idle.executions] == [list(range(8))]
        idle.executions[0].reply()
        await many[7].future

    run(main())


def test_a_withdrawn_queued_job_never_runs_and_ends_at_once():
    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=1)
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        running, _ = make_job("running")
        queued, ended = make_job("queued")
        scheduler.submit(running)
        scheduler.submit(queued)
        assert scheduler.queue_size == 1
        scheduler.withdraw(queued)
        assert ended == [1] and scheduler.queue_size == 0
        instance.executions[0].reply()
        await turns()
        assert [e.payloads for e in instance.executions] == [["running"]]

    run(main())


def test_a_caller_cancelled_in_the_same_turn_as_its_reply_frees_the_instance_and_the_result():
    """Issue 13 item 1: the instance's room must come back however the caller and the reply race."""

    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=1)
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        job, ended = make_job("a")

        async def caller():
            scheduler.submit(job)
            try:
                await job.future
            except asyncio.CancelledError:
                scheduler.withdraw(job)
                raise

        task = asyncio.ensure_future(caller())
        await turns()
        (result,) = instance.executions[0].reply()  # the answer arrives ...
        task.cancel()  # ... and the caller gives up in the same loop turn
        with pytest.raises(asyncio.CancelledError):
            await task
        assert result.releases == 1 and ended == [1]
        follow, _ = make_job("b")
        scheduler.submit(follow)  # the instance takes work again
        assert len(instance.executions) == 2

    run(main())


def test_a_running_job_withdrawn_has_its_result_released_on_arrival():
    async def main():
        scheduler = ModelScheduler("m")
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        job, ended = make_job("a")
        scheduler.submit(job)
        job.future.cancel()
        scheduler.withdraw(job)
        assert ended == []  # the worker still uses what the request holds
        (result,) = instance.executions[0].reply()
        assert result.releases == 1 and ended == [1]

    run(main())


def test_a_dead_instance_fails_its_jobs_and_a_new_one_takes_the_queue():
    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=1)
        old = FakeInstance("old")
        scheduler.add_instance(old)
        jobs = [make_job(i)[0] for i in range(3)]
        for job in jobs:
            scheduler.submit(job)
        old.die(scheduler)
        with pytest.raises(ServerError) as info:
            await jobs[0].future
        assert info.value.status == Status.UNAVAILABLE and "died" in info.value.message
        assert not scheduler.ready
        new = FakeInstance("new")
        scheduler.add_instance(new)
        new.executions[0].reply()
        new.executions[1].reply()
        assert [(await j.future).result.value for j in jobs[1:]] == [1, 2]

    run(main())


def test_an_execution_past_the_timeout_fails_its_jobs_and_the_instance_is_killed():
    async def main():
        scheduler = ModelScheduler("m", execution_timeout_s=0.05)
        instance = FakeInstance("m_0_0")
        scheduler.add_instance(instance)
        job, ended = make_job("a")
        scheduler.submit(job)
        with pytest.raises(ServerError) as info:
            await asyncio.wait_for(job.future, 5)
        assert "m_0_0" in info.value.message and "execution timeout of 0.05 s" in info.value.message
        assert instance.killed and not scheduler.ready and ended == [1]
        late = instance.executions[0].reply()  # the answer comes after all: nobody takes it
        assert late[0].releases == 1

    run(main())


def test_no_instance_can_come_back_fails_waiting_and_later_jobs():
    async def main():
        scheduler = ModelScheduler("m")
        job, ended = make_job("a")
        scheduler.submit(job)
        scheduler.set_unavailable("the callable does not load")
        with pytest.raises(ServerError):
            await job.future
        assert ended == [1]
        with pytest.raises(ServerError):
            scheduler.submit(make_job("b")[0])

    run(main())


def test_a_stream_delivers_every_response_and_is_cancelled_when_its_caller_leaves():
    async def main():
        scheduler = ModelScheduler("m")
        instance = FakeInstance("i")
        scheduler.add_instance(instance)
        job, ended = make_job("s", stream=True)
        scheduler.submit(job)
        execution = instance.executions[0]
        execution.reply(final=False)
        execution.reply(final=False)
        first = await job.queue.get()
        assert not first.final
        scheduler.withdraw(job)  # one response unread: released now
        assert execution.results[1].releases == 1 and execution.cancelled
        later = execution.reply(final=True)
        assert later[0].releases == 1 and ended == [1]
        assert scheduler.executions_in_flight == 0

    run(main())
