"""preserve_ordering: an answer waits until every job started before it has had its own; instances finishing out of
order change nothing, and a job whose caller left (or that failed) holds no later one back."""

from __future__ import annotations

import asyncio

import pytest

from pytriton.exceptions import ServerError
from pytriton.scheduler.dispatcher import BatchPolicy, ModelScheduler
from pytriton.scheduler.job import DONE
from tests.scheduler.fakes import FakeInstance, make_job, turns


async def _setup(preserve: bool, instances: int = 3, batching: BatchPolicy | None = None):
    scheduler = ModelScheduler("m", batching, pipeline_depth=1, preserve_ordering=preserve)
    fakes = [FakeInstance(f"m_{i}") for i in range(instances)]
    for fake in fakes:
        scheduler.add_instance(fake)
    return scheduler, fakes


def _answered(jobs, order: list[int]) -> None:
    for index, job in enumerate(jobs):
        job.future.add_done_callback(lambda _f, index=index: order.append(index))


@pytest.mark.parametrize("preserve", [True, False])
def test_answers_follow_the_start_order(preserve: bool) -> None:
    async def main() -> None:
        scheduler, fakes = await _setup(preserve)
        jobs = [make_job(i)[0] for i in range(3)]
        order: list[int] = []
        _answered(jobs, order)
        for job in jobs:
            scheduler.submit(job)
        executions = {e.payloads[0]: e for f in fakes for e in f.executions}
        executions[2].reply()
        executions[1].reply()
        await turns()
        assert order == ([] if preserve else [2, 1])
        assert scheduler.executions_in_flight == 1  # the instances that finished are free again all the same
        executions[0].reply()
        await turns()
        assert order == ([0, 1, 2] if preserve else [2, 1, 0])
        assert all(job.state == DONE for job in jobs)

    asyncio.run(main())


def test_a_batch_counts_in_its_jobs_order() -> None:
    async def main() -> None:
        scheduler, fakes = await _setup(True, 1, BatchPolicy(max_batch_size=2))
        jobs = [make_job(i)[0] for i in range(3)]
        order: list[int] = []
        _answered(jobs, order)
        for job in jobs:
            scheduler.submit(job)  # the first alone, the others wait
        second = FakeInstance("m_b")
        scheduler.add_instance(second)  # ... and run as one batch there
        assert second.executions[0].payloads == [1, 2]
        second.executions[0].reply()
        await turns()
        assert order == []
        fakes[0].executions[0].reply()
        await turns()
        assert order == [0, 1, 2]

    asyncio.run(main())


def test_a_withdrawn_or_failed_job_holds_back_nothing() -> None:
    async def main() -> None:
        scheduler, fakes = await _setup(True)
        jobs, ended = zip(*(make_job(i) for i in range(3)))
        order: list[int] = []
        _answered(jobs, order)
        for job in jobs:
            scheduler.submit(job)
        executions = {e.payloads[0]: e for f in fakes for e in f.executions}
        held = executions[2].reply()
        executions[1].fail()
        await turns()
        assert order == []
        scheduler.withdraw(jobs[0])  # its caller left: the others go on at once
        await turns()
        assert order == [1, 2]
        with pytest.raises(ServerError):
            jobs[1].future.result()
        assert jobs[2].future.result().result is held[0]
        executions[0].reply()  # the withdrawn job's answer is released on arrival
        assert list(ended) == [[1], [1], [1]]
        assert executions[0].results[0].releases == 1

    asyncio.run(main())


def test_a_withdrawn_job_with_a_held_answer_releases_it() -> None:
    async def main() -> None:
        scheduler, fakes = await _setup(True, 2)
        jobs, ended = zip(*(make_job(i) for i in range(2)))
        for job in jobs:
            scheduler.submit(job)
        executions = {e.payloads[0]: e for f in fakes for e in f.executions}
        held = executions[1].reply()
        scheduler.withdraw(jobs[1])
        assert held[0].releases == 1 and ended[1] == [1]
        executions[0].reply()
        await turns()
        assert jobs[0].future.done() and ended[0] == [1]

    asyncio.run(main())
