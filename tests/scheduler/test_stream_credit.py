"""The credit of a stream: the scheduler tells the instance how many results its slowest reader has taken, so the
instance runs no further ahead than its window; a batched stream is paced by the slowest of its callers that still
read; and a stream that waits for its readers is not held to the execution timeout."""

from __future__ import annotations

import asyncio

from pytriton.scheduler.dispatcher import BatchPolicy, ModelScheduler
from pytriton.scheduler.job import DONE
from tests.scheduler.fakes import FakeInstance, make_job, turns


def test_the_instance_hears_what_its_reader_took_not_what_was_delivered():
    async def main():
        scheduler = ModelScheduler("m")
        instance = FakeInstance("i", window=2)
        scheduler.add_instance(instance)
        job, ended = make_job("s", stream=True)
        scheduler.submit(job)
        (execution,) = instance.executions
        execution.reply(final=False)
        execution.reply(final=False)
        assert execution.blocked and execution.credit == 0  # delivered, not taken: no credit
        (await job.next()).result.release()
        assert execution.credit == 1 and not execution.blocked
        (await job.next()).result.release()
        assert execution.credit == 2
        execution.reply(final=True)
        assert (await job.next()).final and ended == [1] and job.state == DONE

    asyncio.run(main())


def test_a_batched_stream_is_paced_by_its_slowest_reader_until_that_reader_leaves():
    async def main():
        scheduler = ModelScheduler("m", BatchPolicy(max_batch_size=4))
        instance = FakeInstance("i", window=3)
        fast, _ = make_job("fast", stream=True)
        slow, _ = make_job("slow", stream=True)
        scheduler.submit(fast)
        scheduler.submit(slow)
        scheduler.add_instance(instance)
        (execution,) = instance.executions
        assert execution.payloads == ["fast", "slow"]
        for _ in range(3):
            execution.reply(final=False)
        for _ in range(3):
            (await fast.next()).result.release()
        assert execution.credit == 0 and execution.blocked  # the slow one has taken nothing
        (await slow.next()).result.release()
        assert execution.credit == 1
        scheduler.withdraw(slow)  # the slowest reader leaves: the fast one paces the stream now
        assert execution.credit == 3 and not execution.blocked and not execution.cancelled
        scheduler.withdraw(fast)  # nobody reads any more
        assert execution.cancelled
        for result in execution.reply(final=True):
            assert result.releases == 1

    asyncio.run(main())


def test_a_stream_waiting_for_its_reader_is_not_timed_out_until_the_reader_has_taken_everything():
    async def main():
        scheduler = ModelScheduler("m", execution_timeout_s=0.05)
        instance = FakeInstance("i", window=1)
        scheduler.add_instance(instance)
        job, _ = make_job("s", stream=True)
        scheduler.submit(job)
        (execution,) = instance.executions
        execution.reply(final=False)
        await asyncio.sleep(0.2)  # the reader takes nothing: the stream waits for it, it is not stuck
        assert instance.killed is None and scheduler.ready
        (await job.next()).result.release()  # now the instance may go on; its clock runs again
        await asyncio.sleep(0.2)  # ... and it sends nothing more: stuck
        assert instance.killed is not None and "execution timeout" in instance.killed
        failure = await job.next()
        assert isinstance(failure, BaseException) and "execution timeout" in str(failure)
        await turns()

    asyncio.run(main())
