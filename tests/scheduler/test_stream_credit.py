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
        await asyncio.sleep(0.2)  # the reader takes nothing for 4 timeouts: the stream waits for it, it is not stuck
        assert instance.killed is None and scheduler.ready
        (await job.next()).result.release()  # now the instance may go on; its clock runs again
        # ... and it sends nothing more: stuck (waited for, within a bound, not assumed after a guessed time)
        for _ in range(1000):
            if instance.killed is not None:
                break
            await asyncio.sleep(0.01)
        assert instance.killed is not None and "execution timeout" in instance.killed
        failure = await job.next()
        assert isinstance(failure, BaseException) and "execution timeout" in str(failure)
        await turns()

    asyncio.run(main())


def test_a_batched_stream_answers_each_caller_on_its_own_and_a_finished_one_does_not_pace_it():
    async def main():
        scheduler = ModelScheduler("m", BatchPolicy(max_batch_size=4))
        instance = FakeInstance("i", window=2)
        a, a_ended = make_job("a", stream=True)
        b, b_ended = make_job("b", stream=True)
        scheduler.submit(a)
        scheduler.submit(b)
        scheduler.add_instance(instance)
        (execution,) = instance.executions
        execution.reply(final=False, answered={0})
        execution.reply(final=False, answered={0})  # b was skipped twice: as if it had taken both
        assert execution.blocked and execution.credit == 0 and b.queue.empty()
        for _ in range(2):
            assert (await a.next()).result.value == "a"
        assert execution.credit == 2 and not execution.blocked
        execution.reply(final=False, answered={1}, finished={1})  # b's only result is its last
        item = await b.next()
        assert item.final and item.result.value == "b" and b.state == DONE and b_ended == [1]
        assert execution.credit == 3  # b reads no more and a had nothing to read: the stream may go on
        execution.reply(final=False, answered={0})
        execution.reply(final=False, answered={0})
        assert execution.blocked  # a paces it alone now
        for _ in range(2):
            (await a.next()).result.release()
        assert execution.credit == 5 and a.state != DONE and scheduler._load[instance] == 1
        execution.reply(final=False, answered=set(), finished={0})  # a's last message brings no response
        item = await a.next()
        assert item.final and item.result is None and a_ended == [1]
        assert scheduler._load[instance] == 1  # the instance is busy until the execution itself ends
        execution.reply(final=True)
        assert scheduler._load[instance] == 0 and scheduler._free == [instance]

    asyncio.run(main())
