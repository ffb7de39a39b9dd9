"""`ServerCore.begin`'s UnaryCall: a unary request answered from a callback (the gRPC transport's ModelInfer)
gives back what its caller leaves behind and counts as `infer` does."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from pytriton.core.calls import UnaryCall
from pytriton.core.statistics import ModelStatistics
from pytriton.core.types import ExecutionOutput
from pytriton.exceptions import ServerError, Status
from pytriton.scheduler.job import DONE, QUEUED, Delivery, ExecutionStats, Job


def _call(state: str) -> tuple[UnaryCall, SimpleNamespace, asyncio.Future]:
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    withdrawn: list = []

    def withdraw(job: Job) -> None:  # (the dispatcher's: the job is abandoned)
        withdrawn.append(job)
        job.abandon()

    model = SimpleNamespace(name="m", version=1, stats=ModelStatistics(), scheduler=SimpleNamespace(withdraw=withdraw))
    job = Job(None)
    job.state = state
    job.future = future
    model.withdrawn = withdrawn
    return UnaryCall(model, job, SimpleNamespace(trace=None, outputs=[], layout=None, id=""), 0), model, future


def test_a_call_cancelled_while_queued_withdraws_its_job_and_counts_a_canceled_failure():
    async def main() -> None:
        call, model, future = _call(QUEUED)
        call.cancel()
        assert future.cancelled() and model.withdrawn == [call._job]
        assert model.stats.failures["CANCELED"] == 1

    asyncio.run(main())


def test_a_call_cancelled_after_its_result_came_releases_the_result():
    async def main() -> None:
        call, model, future = _call(DONE)
        released: list = []
        future.set_result(Delivery(ExecutionOutput(on_release=lambda: released.append(1)), ExecutionStats(), 0))
        call.cancel()  # (the reset came before the callback that would have answered)
        assert released == [1] and model.withdrawn == [call._job]
        assert model.stats.failures["CANCELED"] == 0  # it ran: not a queued request's cancellation

    asyncio.run(main())


def test_results_and_errors_are_counted_as_infer_counts_them():
    async def main() -> None:
        call, model, future = _call(DONE)
        future.set_result(Delivery(ExecutionOutput(), ExecutionStats(compute_infer_ns=5), 7))
        response = call.result()
        assert response.model_name == "m" and response.model_version == "1"
        assert model.stats.inference_count == 1 and model.stats.durations["queue"] == [1, 7]

        call, model, future = _call(DONE)
        future.set_exception(ServerError(Status.INTERNAL, "the model failed"))
        with pytest.raises(ServerError, match="the model failed"):
            call.result()
        assert model.stats.durations["fail"][0] == 1 and model.stats.inference_count == 0

    asyncio.run(main())
