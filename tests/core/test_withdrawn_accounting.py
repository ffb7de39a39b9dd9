"""How a call its caller left is counted (`core.calls.withdrawn`), as tritonserver 2.51 counts it: a stream that ran
is a success once its model ends, also when its final response came before the caller's leaving was seen
(tests/abuse/test_cancel_statistics.py drives the same through a real server, where the order is the machine's)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from pytriton.core.calls import withdrawn
from pytriton.core.statistics import ModelStatistics
from pytriton.scheduler.job import RUNNING, Delivery, ExecutionStats, Job


class _Released:
    def __init__(self) -> None:
        self.released = False

    def release(self) -> None:
        self.released = True


def _model() -> SimpleNamespace:
    withdrawn_jobs: list[Job] = []
    scheduler = SimpleNamespace(withdraw=lambda job: (withdrawn_jobs.append(job), job.abandon()))
    return SimpleNamespace(stats=ModelStatistics(), scheduler=scheduler, withdrawn=withdrawn_jobs)


def _counts(model: SimpleNamespace) -> tuple[int, int]:
    return model.stats.durations["success"][0], model.stats.durations["fail"][0]


def test_a_stream_whose_final_response_came_before_its_caller_left_is_a_success():
    async def scenario() -> None:
        model = _model()
        job = Job(None, stream=True)
        job.state = RUNNING
        first, last = _Released(), _Released()
        job.deliver(Delivery(first, ExecutionStats(), 0, final=False))
        job.deliver(Delivery(last, ExecutionStats(), 0, final=True))  # (the job is done, nothing read)
        withdrawn(model, job)
        assert _counts(model) == (1, 0)
        assert first.released and last.released and model.withdrawn == [job]

    asyncio.run(scenario())


def test_a_stream_still_running_when_its_caller_leaves_is_counted_when_it_ends():
    async def scenario() -> None:
        model = _model()
        job = Job(None, stream=True)
        job.state = RUNNING
        withdrawn(model, job)
        assert _counts(model) == (0, 0)
        job.deliver(Delivery(_Released(), ExecutionStats(), 0, final=True))
        assert _counts(model) == (1, 0)

    asyncio.run(scenario())
