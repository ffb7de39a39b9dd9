"""The execution timeout over fake instances: an instance runs its executions one after the other, so the clock of
one that waits behind another starts when that one ends; a timed-out instance's room never goes to a waiting job."""

from __future__ import annotations

import asyncio

import pytest

from pytriton.exceptions import ServerError
from pytriton.scheduler.dispatcher import ModelScheduler
from pytriton.scheduler.job import Job
from tests.scheduler.fakes import FakeInstance, make_job


def _two_on_one_instance(timeout_s: float, stream: bool = False) -> tuple[ModelScheduler, FakeInstance, Job, Job]:
    """A scheduler whose one instance (pipeline depth 2) was handed two jobs, "a" then "b"; it runs them in turn."""
    scheduler = ModelScheduler("m", pipeline_depth=2, execution_timeout_s=timeout_s)
    instance = FakeInstance("m_0_0")
    scheduler.add_instance(instance)
    first, second = make_job("a", stream=stream)[0], make_job("b", stream=stream)[0]
    scheduler.submit(first)
    scheduler.submit(second)
    assert len(instance.executions) == 2
    return scheduler, instance, first, second


def _timers(scheduler: ModelScheduler, instance: FakeInstance) -> list[bool]:
    """Whether each execution the instance holds has its timeout clock running, in the order it received them."""
    return [execution.timer is not None for execution in scheduler._running[instance]]


def test_the_clock_of_an_execution_waiting_behind_another_starts_when_that_one_ends():
    async def main():
        scheduler, instance, first, second = _two_on_one_instance(30)
        assert _timers(scheduler, instance) == [True, False]
        instance.executions[0].reply()
        assert _timers(scheduler, instance) == [True]  # the second one runs now
        instance.executions[1].reply()
        assert (await first.future).result.value == "a"
        assert (await second.future).result.value == "b"

    asyncio.run(main())


def test_a_waiting_execution_still_times_out_once_it_could_run():
    async def main():
        _, instance, _, second = _two_on_one_instance(0.1)
        instance.executions[0].reply()
        with pytest.raises(ServerError, match="execution timeout of 0.1 s"):
            await asyncio.wait_for(second.future, 5)
        assert instance.killed

    asyncio.run(main())


def test_a_stream_behind_another_stream_gets_its_clock_when_that_one_ends():
    async def main():
        scheduler, instance, _, short = _two_on_one_instance(30, stream=True)
        for _ in range(3):  # each response restarts the long stream's clock; the short one still waits
            instance.executions[0].reply(final=False)
            assert _timers(scheduler, instance) == [True, False]
        instance.executions[0].reply(final=True)
        assert _timers(scheduler, instance) == [True]
        instance.executions[1].reply(final=True)
        assert (await short.queue.get()).final

    asyncio.run(main())


def test_the_room_of_a_timed_out_execution_never_goes_to_a_waiting_job():
    async def main():
        scheduler = ModelScheduler("m", pipeline_depth=1, execution_timeout_s=0.05)
        stuck, other = FakeInstance("stuck"), FakeInstance("other")
        scheduler.add_instance(stuck)
        hung = make_job("hung")[0]
        scheduler.submit(hung)
        waiting = make_job("waiting")[0]
        scheduler.submit(waiting)  # no instance has room: it waits
        assert scheduler.queue_size == 1
        with pytest.raises(ServerError):
            await asyncio.wait_for(hung.future, 5)
        assert len(stuck.executions) == 1  # nothing more was sent to the instance being killed
        assert scheduler.queue_size == 1
        scheduler.add_instance(other)  # e.g. the restarted worker
        other.executions[0].reply()
        assert (await waiting.future).result.value == "waiting"

    asyncio.run(main())
