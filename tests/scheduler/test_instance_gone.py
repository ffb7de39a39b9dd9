"""An instance whose worker went away before its source noticed: the jobs handed to it never started, so they go to
another instance (or wait for the restarted one) instead of failing, and the instance gets no more work."""

from __future__ import annotations

import asyncio
from typing import Any

from pytriton.scheduler.dispatcher import ModelScheduler
from pytriton.scheduler.instance import InstanceGoneError
from tests.scheduler.fakes import FakeInstance, make_job


class VanishedInstance(FakeInstance):
    """Its worker is gone, but nobody has removed it yet: every execute says so."""

    def execute(self, payloads: list[Any], sink: Any):
        self.tries = getattr(self, "tries", 0) + 1
        raise InstanceGoneError(f"model instance '{self.label}' is not connected")


def test_jobs_handed_to_a_vanished_instance_go_to_another_one():
    async def main():
        scheduler = ModelScheduler("m")
        healthy, vanished = FakeInstance("healthy"), VanishedInstance("vanished")
        scheduler.add_instance(healthy)
        scheduler.add_instance(vanished)  # the most recently added idle instance is tried first
        jobs = [make_job(i)[0] for i in range(4)]
        for job in jobs:
            scheduler.submit(job)
        assert vanished.tries == 1  # tried once, then out of the scheduler
        assert vanished not in scheduler._load
        assert [e.payloads for e in healthy.executions] == [[0], [1]] and scheduler.queue_size == 2
        while healthy.running:
            healthy.running[0].reply()
        assert [(await job.future).result.value for job in jobs] == [0, 1, 2, 3]

    asyncio.run(main())


def test_with_no_other_instance_the_jobs_wait_for_the_restarted_one():
    async def main():
        scheduler = ModelScheduler("m")
        scheduler.add_instance(VanishedInstance("old"))
        job, ended = make_job("a")
        scheduler.submit(job)
        assert scheduler.queue_size == 1 and not scheduler.ready and ended == []
        restarted = FakeInstance("new")
        scheduler.add_instance(restarted)
        restarted.executions[0].reply()
        assert (await job.future).result.value == "a" and ended == [1]

    asyncio.run(main())
