"""A request's way through the core once `ServerCore.begin` (a unary call) or `ServerCore.infer_stream` (a decoupled
model's responses) has it: the one `Call` each unary request is (its settlement, response and statistics), the
stream of a decoupled model's responses, and what both do when their caller leaves or their job fails."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, AsyncGenerator, Callable, Coroutine, Protocol

from pytriton.core.classification import classify_outputs
from pytriton.core.trace import INFER_RESPONSE_COMPLETE, REQUEST_END, stamp_execution, stamp_stream_delivery
from pytriton.core.types import ExecutionOutput, InferRequest, InferResponse
from pytriton.core.validation import drop_repeated_outputs
from pytriton.exceptions import ServerError, Status, internal
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
        elif job.queue is not None and not job.queue.empty():  # a stream whose final response came before its
            # caller's leaving was seen: it waits unread, last in the queue
            unread = []
            while not job.queue.empty():
                unread.append(job.queue.get_nowait())
            for item in unread:  # (back for the withdrawal to release)
                job.queue.put_nowait(item)
            _count_orphan(model, job, start, unread[-1])
    model.scheduler.withdraw(job)


def _count_orphan(model: Model, job: Job, start: int, item: Delivery | BaseException) -> None:
    """The end of an execution whose caller left while it ran, counted as `settle` would have (a stream: by
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


def response_of(model: Model, request: InferRequest, output: ExecutionOutput | None) -> InferResponse:
    """The client's response for one result (or the error it carries)."""
    if output is None:
        raise internal(f"Failed to process the request(s) for model '{model.name}', message: no response")
    if output.error:  # the model's own answer for this request (e.g. output region too small)
        output.release()
        raise ServerError(output.error_status or Status.INTERNAL, output.error)
    outputs = output.outputs
    if request.layout is None and request.outputs and any("classification" in o.parameters for o in request.outputs):
        try:
            outputs = classify_outputs(model.config, request, outputs)
        except BaseException:
            output.release()
            raise
    return InferResponse(model.name, str(model.version), request.id, outputs, output.parameters, output.release)


def record_success(model: Model, job: Job, stats: ExecutionStats, start: int, queue_ns: int) -> None:
    """A request that the model answered, in its statistics."""
    model.stats.record_success(job.batch_size, time.perf_counter_ns() - start, queue_ns, stats.compute_input_ns,
                               stats.compute_infer_ns, stats.compute_output_ns)


def settle(model: Model, job: Job, request: InferRequest, start: int, future: asyncio.Future[Any]
           ) -> tuple[InferResponse, ExecutionStats]:  # fmt: skip
    """The end of a unary job whose `future` is done (not cancelled): its response and execution stats, or the
    ServerError it ended with; counted in the model's statistics either way."""
    trace = request.trace
    delivery: Delivery | None = None
    try:
        error = future.exception()
        if error is not None and not isinstance(error, Exception):
            raise error
        item = error if error is not None else future.result()
        if isinstance(item, BaseException):
            raise delivery_error(model, item)
        delivery = item
        if trace is not None:
            stamp_execution(trace, item.stats)
        response = response_of(model, request, item.result)
    except ServerError as exc:
        if delivery is not None and delivery.result is not None:  # the model answered with an error response:
            record_success(model, job, delivery.stats, start, delivery.queue_ns)  # a success, as in Triton
        else:
            model.stats.record_failure(time.perf_counter_ns() - start, exc.failure_reason)
        raise
    record_success(model, job, item.stats, start, item.queue_ns)
    if trace is not None:
        trace.stamp(INFER_RESPONSE_COMPLETE)
        trace.stamp(REQUEST_END)
    return response, item.stats


class Call(Protocol):
    """One unary inference `ServerCore.begin` started: `future` is done once `result()` can answer (the response, or
    the ServerError it ended with, counted in the model's statistics either way); `watch(callback)` calls back once it
    is (never once cancelled); `cancel()` withdraws it (its caller left). Awaiting it is `ServerCore.infer`."""

    future: asyncio.Future[Any]

    def watch(self, callback: Callable[[asyncio.Future[Any]], None]) -> None: ...

    def result(self) -> InferResponse: ...

    def result_with_stats(self) -> tuple[InferResponse, ExecutionStats]: ...

    def cancel(self) -> None: ...


class UnaryCall:
    """A `Call` of a model's own instances: the request went to its model's scheduler as one job (`ServerCore.submit`;
    its sequence and BLS chain are the job's), and the job's future is the call's."""

    __slots__ = ("_model", "_job", "_request", "_start", "future")

    def __init__(self, model: Model, job: Job, request: InferRequest, start: int):
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
        return settle(self._model, self._job, self._request, self._start, self.future)[0]

    def result_with_stats(self) -> tuple[InferResponse, ExecutionStats]:
        """`result()` with what the execution took."""
        return settle(self._model, self._job, self._request, self._start, self.future)

    def cancel(self) -> None:
        """The caller left: the job is withdrawn, as a cancelled `infer` withdraws it (its future is cancelled; a
        result it delivered already is released by the withdrawal)."""
        if not self.future.done():
            self.future.cancel()
        withdrawn(self._model, self._job, self._start)


class RunCall:
    """A `Call` that a coroutine of the core answers (`ServerCore.begin`'s variants: a model whose responses are
    cached, an ensemble's steps): the coroutine runs as a task, whose result is (response, execution stats)."""

    __slots__ = ("future",)

    def __init__(self, run: Coroutine[Any, Any, tuple[InferResponse, ExecutionStats]]):
        self.future: asyncio.Future[Any] = asyncio.ensure_future(run)

    def watch(self, callback: Callable[[asyncio.Future[Any]], None]) -> None:
        """Call `callback(future)` once the run has ended (from a done callback; not once cancelled)."""
        self.future.add_done_callback(lambda future: None if future.cancelled() else callback(future))

    def result(self) -> InferResponse:
        return self.result_with_stats()[0]

    def result_with_stats(self) -> tuple[InferResponse, ExecutionStats]:
        answer: tuple[InferResponse, ExecutionStats] = self.future.result()
        return answer

    def cancel(self) -> None:
        """The caller left: the run is cancelled (its steps withdrawn; a response it made meanwhile released)."""
        future = self.future
        if not future.cancel() and not future.cancelled() and future.exception() is None:
            future.result()[0].release()


async def answer(call: Call) -> tuple[InferResponse, ExecutionStats]:
    """Wait for `call` and return its response and execution stats; a caller that leaves (cancelled) withdraws it."""
    try:
        await call.future
    except asyncio.CancelledError:
        call.cancel()
        raise
    except Exception:  # noqa: BLE001 - `result_with_stats` raises it (settled and counted)
        pass
    return call.result_with_stats()


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


async def stream_responses(core: ServerCore, request: InferRequest, errors_inline: bool = False
                           ) -> AsyncGenerator[InferResponse, None]:  # fmt: skip
    """See `ServerCore.infer_stream`."""
    model = core.registry.get(request.model_name, request.model_version)
    if model.ensemble is not None or model.cache is not None:  # (not decoupled: one response, through its variant)
        yield (await answer(core.begin(request, model)))[0]
        return
    if len(request.outputs) > 1:  # (as `ServerCore.begin` does for the other calls)
        drop_repeated_outputs(request.outputs)
    start = time.perf_counter_ns()
    model, job = core.submit(request, True, False, model, start)
    total = ExecutionStats()
    queue_ns = 0
    completed = False
    first_response = model.stats.first_response  # None unless histogram_latencies: nothing to time
    trace = request.trace
    try:
        while True:
            try:
                item: Delivery = await _receive(model, job)  # (taking it gives credit back)
                if trace is not None:
                    stamp_stream_delivery(trace, item)
                response = None
                if item.result is not None:
                    try:
                        response = response_of(model, request, item.result)
                    except ServerError as exc:  # the model's error response
                        if not errors_inline:
                            raise
                        response = InferResponse(model.name, str(model.version), request.id, [], error=exc)
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
    record_success(model, job, total, start, queue_ns)
    if trace is not None:
        trace.stamp(REQUEST_END)


__all__ = ["Call", "RunCall", "UnaryCall", "answer", "delivery_error", "record_success", "response_of", "settle",
           "stream_responses", "withdrawn"]
