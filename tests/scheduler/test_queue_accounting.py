"""The weight of waiting jobs that the dynamic batcher's queue delay compares with its target is kept as a running
total (it was summed over the whole queue on every scheduling pass: with 32k requests waiting, dispatching them took
5 s of event loop instead of 0.06 s). Random submissions, withdrawals and replies must keep it exact."""

from __future__ import annotations

import asyncio
import random

import pytest

from pytriton.scheduler.dispatcher import BatchPolicy, ModelScheduler
from pytriton.scheduler.job import QUEUED
from tests.scheduler.fakes import FakeInstance, make_job


def _waiting_weight(scheduler: ModelScheduler) -> int:
    return sum(job.weight for job in scheduler._queue if job.state == QUEUED)


@pytest.mark.parametrize("seed", range(20))
def test_the_waiting_weight_stays_exact(seed: int) -> None:
    async def main() -> None:
        rng = random.Random(seed)
        scheduler = ModelScheduler("m", BatchPolicy(8, max_queue_delay_us=rng.choice((0, 50, 100_000)),
                                                    preferred_batch_sizes=(4,)))
        instance = FakeInstance("i")
        jobs = []
        for step in range(300):
            action = rng.random()
            if action < 0.5:
                job = make_job(step, batch_size=rng.randint(1, 3))[0]
                scheduler.submit(job)
                jobs.append(job)
            elif action < 0.7 and jobs:
                scheduler.withdraw(rng.choice(jobs))
            elif action < 0.9 and instance.running:
                rng.choice(instance.running).reply()
            elif step == 20:
                scheduler.add_instance(instance)
            if rng.random() < 0.2:
                await asyncio.sleep(0)
            assert scheduler._queued_weight == _waiting_weight(scheduler), (seed, step)
        scheduler.fail_all("stopping")
        assert scheduler._queued_weight == 0 == _waiting_weight(scheduler)

    asyncio.run(main())
