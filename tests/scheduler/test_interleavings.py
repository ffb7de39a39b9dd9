"""Thousands of random interleavings of submissions, replies (a stream's requests answered in step, or each on its
own with its own last result), caller cancellations, instance deaths, execution timeouts and, under a queue policy,
priorities, a full queue and queue timeouts (REJECT or DELAY, on a fake clock): afterwards no instance
room, result buffer or request resource is lost, and none is freed twice; a stream never runs further ahead of its
slowest reader than its window, and readers that read always give it credit back. What a job holds while an instance
may still write for it (`Job.on_settled`: client regions) is released once, and never while its instance still runs it
(an execution failed by its timeout keeps it until the instance is gone)."""

from __future__ import annotations

import asyncio
import random

import pytest

from pytriton.exceptions import ServerError
from pytriton.scheduler.dispatcher import BatchPolicy, ModelScheduler
from pytriton.scheduler.job import DONE, Delivery
from pytriton.scheduler.queue_policy import LevelPolicy, PolicyQueue, QueueRules
from tests.scheduler.fakes import FakeInstance, FakeResult, make_job


class Caller:
    """What the core does for one request: submit, await, withdraw on cancel, release what it consumed."""

    def __init__(self, scheduler: ModelScheduler, index: int, stream: bool, batch_size: int,
                 instances: list[FakeInstance]):
        self.job, self.ended = make_job(index, batch_size, signature=batch_size % 2, stream=stream)
        # per settling: whether its instance was over with the job then (the execution ended, or the job had its own
        # last result: a stream answering each request on its own)
        self.settled: list[bool] = []
        self.job.on_settled(lambda: self.settled.append(all(
            e.finished or e.payloads.index(index) in e.closed for i in instances for e in i.executions
            if index in e.payloads)))
        self.scheduler = scheduler
        self.outcome = "pending"
        self.task = asyncio.ensure_future(self.run())

    async def run(self) -> None:
        job = self.job
        try:  # as in the core: submitted in the task's first step, awaited right after
            self.scheduler.submit(job)
        except ServerError:
            job.finish()
            self.outcome = "refused"
            return
        try:
            if job.queue is None:
                delivery: Delivery = await job.future
                delivery.result.release()
            else:
                while True:
                    item = await job.next()
                    if isinstance(item, BaseException):
                        raise item
                    if item.result is not None:
                        item.result.release()
                    if item.final:
                        break
            self.outcome = "ok"
        except asyncio.CancelledError:
            self.scheduler.withdraw(job)
            self.outcome = "cancelled"
            raise
        except ServerError:
            self.outcome = "failed"
            self.scheduler.withdraw(job)  # as the core does when it stops reading a stream early


async def scenario(seed: int) -> None:
    rng = random.Random(seed)
    batching = BatchPolicy(max_batch_size=4) if rng.random() < 0.4 else None
    stream = rng.random() < 0.3
    window = rng.choice((0, 1, 3)) if stream else 0  # how far a stream may run ahead of its slowest reader
    prng = random.Random(-seed - 1)  # the queue policy's choices: the other choices stay as they were for each seed
    rules = None
    if prng.random() < 0.4:
        level = LevelPolicy(prng.choice((0, 0, 2, 5)), prng.choice((0, 60_000_000)), prng.random() < 0.5,
                            prng.random() < 0.5)
        rules = QueueRules(prng.choice((0, 2)), prng.choice((0, 1, 2)), level,
                           {1: LevelPolicy(prng.choice((0, 1)), 60_000_000)} if prng.random() < 0.5 else {})
    scheduler = ModelScheduler("m", batching, pipeline_depth=rng.choice((1, 2, 3)),
                               execution_timeout_s=rng.choice((None, None, 30.0)), queueing=rules,
                               preserve_ordering=not stream and random.Random(seed * 7 + 3).random() < 0.5)
    clock = [0]
    if isinstance(scheduler._queue, PolicyQueue):
        scheduler._queue._clock = lambda: clock[0]
        scheduler._queue.call_later = lambda *args: asyncio.get_running_loop().call_later(3600, lambda: None)
    instances: list[FakeInstance] = []
    serial = 0

    def new_instance() -> None:
        nonlocal serial
        serial += 1
        instance = FakeInstance(f"m_{serial}", window)
        instances.append(instance)
        scheduler.add_instance(instance)

    for _ in range(rng.randint(1, 3)):
        new_instance()
    callers: list[Caller] = []
    for step in range(rng.randint(20, 60)):
        action = rng.random()
        live = [i for i in instances if not i.dead]
        running = [e for i in live for e in i.running]
        if action < 0.35:
            callers.append(Caller(scheduler, len(callers), stream, rng.randint(1, 2), instances))
            if rules is not None:
                callers[-1].job.priority = prng.choice((0, 1, 2, 3))
                callers[-1].job.timeout_us = prng.choice((0, 1000, 90_000_000))
        elif action < 0.6 and running:
            execution = rng.choice(running)
            final = not stream or rng.random() < 0.5 or execution.blocked  # (a blocked stream may only end)
            count = len(execution.payloads)
            error = rng.randrange(count) if rng.random() < 0.1 else None
            answered = finished = None
            if stream and not final and rng.random() < 0.6:  # each request of the batch answered on its own
                answered = {i for i in range(count) if rng.random() < 0.5}
                finished = {i for i in range(count) if rng.random() < 0.25}
            execution.reply(final=final, error_index=error, answered=answered, finished=finished)
        elif action < 0.75 and callers:
            rng.choice(callers).task.cancel()
        elif action < 0.8 and live:
            rng.choice(live).die(scheduler)
            if rng.random() < 0.8:
                new_instance()
        elif action < 0.85 and running and scheduler.execution_timeout_s:
            timed_out = [e for e in scheduler._running.get(rng.choice(live), ())]
            if timed_out:
                timed_out[0].expired()  # as if the execution timeout fired now
                victim = timed_out[0].instance
                victim.die(scheduler)
                new_instance()
        elif action < 0.87:
            new_instance()
        if rules is not None and prng.random() < 0.1:  # time passes: queue timeouts expire (their timers fire)
            clock[0] += prng.choice((2_000_000, 70_000_000_000))
            scheduler._queue.reject_expired()
        for _ in range(rng.randint(0, 2)):  # let callers run: replies and cancels land in every order
            await asyncio.sleep(0)
    # Readers that read get credit back: once they have had their turns, no stream that has one is held back.
    for _ in range(5):
        await asyncio.sleep(0)
    for execution in (e for i in instances if not i.dead for e in i.running):
        assert not execution.blocked or execution.cancelled, (seed, execution.sent, execution.credit)
    # Settle: every execution still running gets its final answer, until nothing runs and nothing waits.
    if not any(not i.dead for i in instances):
        new_instance()
    for _ in range(1000):
        running = [e for i in instances if not i.dead for e in i.running]
        if not running and scheduler.queue_size == 0 and all(c.task.done() for c in callers):
            break
        for execution in running:
            execution.reply(final=True)
        await asyncio.sleep(0)
    assert all(c.task.done() for c in callers), seed

    for caller in callers:
        if caller.outcome == "pending" and caller.task.cancelled() and caller.job.enqueued_ns == 0:
            continue  # cancelled before its first step: it never reached the scheduler
        assert caller.outcome != "pending", (seed, caller.job.payload, caller.job.state, caller.job.abandoned,
                                             caller.task.done(), caller.task.cancelled(), caller.ended, caller.task.exception())
        assert caller.ended == [1], (seed, caller.job.payload, caller.ended, caller.outcome)
        assert caller.settled == [True], (seed, caller.settled)
        assert caller.job.state == DONE
    results = [r for i in instances for e in i.executions for r in e.results]
    assert all(r.releases == 1 for r in results), (seed, [r.releases for r in results])
    assert not FakeResult.released_twice
    assert scheduler.queue_size == 0 and scheduler.executions_in_flight == 0, seed
    assert scheduler._queued_weight == 0, seed
    live = [i for i in instances if not i.dead]
    assert sorted(scheduler._free, key=id) == sorted(live, key=id), seed  # every live instance has room again
    assert all(scheduler._load[i] == 0 for i in live), seed


@pytest.mark.parametrize("block", range(10))
def test_random_interleavings_lose_and_double_free_nothing(block: int) -> None:
    async def main() -> None:
        for seed in range(block * 300, (block + 1) * 300):
            await scenario(seed)

    asyncio.run(main())
