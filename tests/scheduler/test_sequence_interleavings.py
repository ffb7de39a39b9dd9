"""Random interleavings of sequence requests (starts, middles, ends, unknown sequences), replies, failures, caller
cancellations, instance deaths and arrivals, and idle releases on a fake clock: every request ends exactly once, a
sequence never has two requests in flight nor moves to another instance, and once every sequence has ended no
batch slot is lost."""

from __future__ import annotations

import asyncio
import random

import pytest

from pytriton.exceptions import ServerError
from pytriton.model_config.sequence import SequenceBatcher, SequenceStrategy
from pytriton.scheduler.job import DONE
from tests.scheduler.fakes import Clock, FakeInstance, FakeRequests, make_job


async def scenario(seed: int) -> None:
    rng = random.Random(seed)
    oldest = rng.random() < 0.5
    max_batch_size = rng.choice([0, 1, 2, 3])
    policy = SequenceBatcher(SequenceStrategy.OLDEST if oldest else SequenceStrategy.DIRECT, 1000,
                             max_candidate_sequences=rng.randint(1, 3))
    from pytriton.scheduler.sequence import SequenceScheduler

    clock = Clock()
    scheduler = SequenceScheduler("m", policy, max_batch_size, FakeRequests(), clock=clock)
    instances = [FakeInstance(f"i{n}") for n in range(rng.randint(1, 3))]
    for instance in instances:
        scheduler.add_instance(instance)
    jobs = []
    home: dict = {}  # (sequence, generation) -> the instance its requests ran on
    generation: dict = {}  # sequence -> its generation (a START after its END begins a new one)
    for _ in range(rng.randint(20, 80)):
        action = rng.random()
        if action < 0.45:
            seq = rng.randint(1, 5)
            flags = rng.choice(["S", "", "", "E", "SE"])
            if "S" in flags and seq not in scheduler._sequences:  # (a sequence ended, released or lost)
                generation[seq] = generation.get(seq, 0) + 1
            job, ended = make_job((seq, flags, generation.get(seq, 0)))
            try:
                scheduler.submit(job)
            except ServerError:
                job.finish()
            jobs.append((job, ended))
        elif action < 0.75:
            running = [e for i in instances for e in i.running]
            if running:
                rng.choice(running).reply() if rng.random() < 0.9 else rng.choice(running).fail()
        elif action < 0.82:
            waiting = [j for j, _ in jobs if j.state != DONE]
            if waiting:
                scheduler.withdraw(rng.choice(waiting))
        elif action < 0.86 and len([i for i in instances if not i.dead]) > 1:
            victim = rng.choice([i for i in instances if not i.dead])
            victim.die(scheduler)
        elif action < 0.9:
            fresh = FakeInstance(f"i{len(instances)}")
            instances.append(fresh)
            scheduler.add_instance(fresh)
        else:
            clock.ns += rng.choice([100_000, 1_000_000])
            scheduler.reap()
        for instance in instances:  # invariants after every step
            for execution in instance.running:
                for payload in execution.payloads:
                    if payload[0] == "req":
                        key = (payload[1], payload[4])
                        assert home.setdefault(key, instance) is instance, (seed, key)
        in_flight = [(p[1], p[4]) for i in instances for e in i.running for p in e.payloads if p[0] == "req"]
        assert len(in_flight) == len(set(in_flight)), (seed, in_flight)
        await asyncio.sleep(0)
    # drain: answer everything and release the idle, until nothing is left (a backlog waits for released slots)
    for _ in range(50):
        for _ in range(200):
            running = [e for i in instances for e in i.running]
            if not running:
                break
            running[0].reply()
        clock.ns += 10_000_000
        scheduler.reap()
        if not any(i.running for i in instances) and not scheduler.active_sequences:
            break
    for job, ended in jobs:
        assert job.state == DONE and len(ended) == 1, (seed, job.state, ended)
    assert scheduler.active_sequences == 0 and scheduler.queue_size == 0, seed
    alive = [i for i in instances if not i.dead]
    assert len(scheduler._free_slots) == len(alive) * scheduler._slot_count, seed
    for job, _ in jobs:
        if job.future is not None and job.future.done() and not job.future.cancelled():
            job.future.exception()


@pytest.mark.parametrize("chunk", range(8))
def test_random_interleavings_lose_nothing(chunk):
    async def main():
        for seed in range(chunk * 250, (chunk + 1) * 250):
            await scenario(seed)

    asyncio.run(main())
