"""A request's way through the core past `ServerCore._submit`, apart from server_core.py's `infer`: a decoupled model's
responses (`stream_responses`), a unary call answered from a callback (`UnaryCall`), and what both do when their caller
leaves or their job fails."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, AsyncGenerator, Callable

from pytriton.core.trace import QUEUE_START, REQUEST_END, REQUEST_START, stamp_stream_delivery
from pytriton.core.types import InferRequest, InferResponse
from pytriton.exceptions import ServerError, Status
from pytriton.scheduler.job import DONE, HELD, QUEUED, Delivery, ExecutionStats, Job

if TYPE_CHECKING:
    from pytriton.core.registry import Model
    from pytriton.core.server_core import ServerCore

logger = logging.getLogger("pytriton.core")


def withdrawn(model: Model, job: Job, start: int = 0) -> None:
    """The caller left (cancelled) while `job` was on its way: it is withdrawn. Counted as Triton 2.51 counts it: before
    it ran, a CANCELED failure; once it ran, by how its execution ends (a stream: its final response) — a success with
    its execution times when the model answered (the answer is released unread), else a failure (`start`: when the
    request came, default its enqueueing)."""
    if job.abandoned:
        return
    if job.state == HELD:  # held back before the scheduler (core/output_holds.py): it never runs, it ends now
        model.stats.record_failure(time.perf_counter_ns() - job.enqueued_ns, "CANCELED")
        job.abandon()
        job.finish()
        return
    if job.state == QUEUED:  # cancelled before it ran: a failure, as Triton counts it
        model.stats.record_failure(time.perf_counter_ns() - job.enqueued_ns, "CANCELED")
    else:  # (a decoupled model's stream: by how its final response comes, as measured too)
        start = start or job.enqueued_ns
        future = job.future  # (None for a stream)
        if future is not None and future.done() and not future.cancelled():  # it ended as its caller left
            error = future.exception()
            _count_orphan(model, job, start, error if error is not None else future.result())
        elif job.state != DONE:
            job.orphaned = lambda item: _count_orphan(model, job, start, item)
    model.scheduler.withdraw(job)


def _count_orphan(model: Model, job: Job, start: int, item: Delivery | BaseException) -> None:
    """The end of an execution whose caller left while it ran, counted as `ServerCore._settle` would have (a stream: by
    its final delivery's execution times)."""
    if isinstance(item, Delivery) and not isinstance(item.result, BaseException):
        stats = item.stats
        model.stats.record_success(job.batch_size, time.perf_counter_ns() - start, item.queue_ns,
                                   stats.compute_input_ns, stats.compute_infer_ns, stats.compute_output_ns)
    else:
        reason = getattr(item, "failure_reason", "OTHER") if isinstance(item, ServerError) else "OTHER"
        model.stats.record_failure(time.perf_counter_ns() - start, reason)


def delivery_error(model: Model, item: BaseException) -> ServerError:
    """What a job delivered instead of a result, as the ServerError its caller raises."""
    if isinstance(item, ServerError):
        return item
    logger.error("inference on model '%s' failed", model.name, exc_info=item)
    return ServerError(Status.INTERNAL, f"internal error while running model '{model.name}': {item}")


class UnaryCall:
    """`ServerCore.begin_infer`'s request on its way: `future` is done once `result()` can answer (the response, or the
    ServerError it ended with, counted in the model's statistics either way); `cancel()` withdraws it (its caller left)."""

    __slots__ = ("_core", "_model", "_job", "_request", "_start", "future")

    def __init__(self, core: ServerCore, model: Model, job: Job, request: InferRequest, start: int):
        self._core = core
        self._model = model
        self._job = job
        self._request = request
        self._start = start
        future = job.future
        assert future is not None
        self.future: asyncio.Future[Any] = future

    def watch(self, callback: Callable[[asyncio.Future[Any]], None]) -> None:
        """Call `callback(future)` as soon as the job delivers or fails (see `Job.watch`; not once cancelled)."""
        self._job.watch(callback)

    def result(self) -> InferResponse:
        """Once `future` is done (and the call not cancelled)."""
        return self._core._settle(self._model, self._job, self._request, self._start, self.future)[0]

    def cancel(self) -> None:
        """The caller left: the job is withdrawn, as a cancelled `infer` withdraws it (its future is cancelled; a
        result it delivered already is released by the withdrawal)."""
        if not self.future.done():
            self.future.cancel()
        withdrawn(self._model, self._job, self._start)


async def _receive(model: Model, job: Job) -> Delivery:
    """The job's next delivery; a caller who leaves withdraws the job; errors become ServerErrors."""
    try:
        item = await job.next()  # (taking it gives credit back)
    except asyncio.CancelledError:
        withdrawn(model, job)
        raise
    except ServerError:
        raise
    except Exception as exc:  # noqa: BLE001
        item = exc
    if isinstance(item, BaseException):
        raise delivery_error(model, item)
    return item


async def stream_responses(core: ServerCore, request: InferRequest) -> AsyncGenerator[InferResponse, None]:
    """See `ServerCore.infer_stream`."""
    ensemble = core.registry.get(request.model_name, request.model_version)
    if ensemble.ensemble is not None:  # (not decoupled: one response)
        yield (await core._infer_ensemble(ensemble, request))[0]
        return
    start = time.perf_counter_ns()
    trace = request.trace
    if trace is not None:
        trace.stamp(REQUEST_START, start)
    model, job = core._submit(request, stream=True)
    if trace is not None:
        trace.model_version = str(model.version)
        trace.stamp(QUEUE_START, job.enqueued_ns)
    total = ExecutionStats()
    queue_ns = 0
    completed = False
    first_response = model.stats.first_response  # None unless histogram_latencies: nothing to time
    try:
        while True:
            try:
                item: Delivery = await _receive(model, job)  # (taking it gives credit back)
                if trace is not None:
                    stamp_stream_delivery(trace, item)
                response = core._response(model, request, item.result) if item.result is not None else None
            except ServerError as exc:
                model.stats.record_failure(time.perf_counter_ns() - start, exc.failure_reason)
                raise
            queue_ns = item.queue_ns
            total.compute_input_ns += item.stats.compute_input_ns
            total.compute_infer_ns += item.stats.compute_infer_ns
            total.compute_output_ns += item.stats.compute_output_ns
            if response is not None:
                response.final = item.final
                if first_response is not None:
                    first_response.observe(time.perf_counter_ns() - start)
                    first_response = None
                yield response
            if item.final:
                completed = True
                break
    finally:
        if not completed:  # the consumer stopped reading: the stream is cancelled, unread results released
            withdrawn(model, job, start)
    core._record_success(model, job, total, start, queue_ns)
    if trace is not None:
        trace.stamp(REQUEST_END)
