"""A request's life in the scheduler, from submission until everything it holds is released.

A job is owned by the scheduler, not by the caller awaiting it: the caller may give up at any moment (a
deadline, a reset stream, a closed connection), and the job still ends exactly once — when its execution
completes, or at once if it never started — running its cleanups (in-flight counts) then. What an instance may still
write into (client region references, held output bytes: `on_settled`) goes with the job's end too, unless its execution
was failed while the instance ran on (an execution timeout): then once that instance has answered or is gone.
Results that arrive for a caller who left are released on arrival.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any, Callable, Hashable, Protocol

logger = logging.getLogger("pytriton.scheduler")

class Releasable(Protocol):
    """A result whose buffers (e.g. a worker's response slots) go back once it is consumed or unwanted."""

    def release(self) -> None: ...


@dataclasses.dataclass(slots=True)
class ExecutionStats:
    """What one execution took, as the instance measured it."""

    batch_size: int = 0
    compute_input_ns: int = 0
    compute_infer_ns: int = 0
    compute_output_ns: int = 0
    compute_start_ns: int = 0  # when the instance began (perf_counter_ns, comparable across processes); 0: unknown


@dataclasses.dataclass(slots=True)
class Delivery:
    """One result for one job: the result (or the error for this request), the execution's stats, the ns the job
    waited in the queue, and whether it is the job's last."""

    result: Any
    stats: ExecutionStats
    queue_ns: int
    final: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class Reentry:
    """What makes a job a call back into its own model: executions of that model wait for it (a BLS request whose call
    chain holds the model). It runs only on an idle instance other than the `blocked` ones (those wait for it), or
    fails at once naming `cycle` (the call chain, e.g. "BLS call cycle: 'a' -> 'b' -> 'a'"): in a queue it could wait
    forever for an instance that waits for it."""

    blocked: frozenset[str]  # instance labels
    cycle: str


QUEUED, RUNNING, DONE = "queued", "running", "done"
# Submitted, but not handed to the scheduler yet: the core holds it back until output bytes it names are no longer
# written by a call whose caller left (core/output_holds.py). Withdrawn there, it ends at once, never having run.
HELD = "held"


class _NoResult:
    """The type of NO_RESULT."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_RESULT"


# In a result list of a stream of several requests: this message brings nothing to that request (each request of a
# decoupled model's batch is answered on its own).
NO_RESULT: Any = _NoResult()


class _Rescheduled:
    """The type of RESCHEDULED."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "RESCHEDULED"


# In a result list: the model gave this request back to run again (Triton's TRITONSERVER_REQUEST_RELEASE_RESCHEDULE);
# this execution is done with it and brings it nothing. A scheduler of iterative sequences queues it again in its
# sequence's slot; any other fails it (see ModelScheduler._rescheduled).
RESCHEDULED: Any = _Rescheduled()


class Job:
    """One request handed to a model's scheduler.

    `payload` is opaque to the scheduler (the instance knows what it is); `batch_size` counts toward
    max_batch_size; jobs batch together only when their `signature`s are equal. A unary job's caller awaits
    `future` (or is called back by `on_done`, see `watch`); a streaming job's caller reads `queue` (Delivery items, or
    an exception, until a final one).
    """

    __slots__ = ("payload", "batch_size", "weight", "signature", "stream", "state", "abandoned", "enqueued_ns", "future",
                 "queue", "taken", "execution", "_cleanups", "priority", "timeout_us", "request_id", "gate", "orphaned",
                 "on_done", "reentry", "_settle")

    def __init__(self, payload: Any, batch_size: int = 1, signature: Hashable = None, stream: bool = False,
                 request_id: str = "", loop: asyncio.AbstractEventLoop | None = None, wanted: bool = True):
        self.payload = payload
        self.batch_size = batch_size  # as validated (0 for a request with an empty batch)
        self.weight = max(batch_size, 1)  # what it counts toward max_batch_size
        self.signature = signature
        self.stream = stream
        self.state = QUEUED
        # the caller went away (`wanted` False: a job nobody waits for, e.g. a not-ready row; its results are
        # released on arrival)
        self.abandoned = not wanted
        self.enqueued_ns = 0
        if stream or not wanted:
            self.future: asyncio.Future[Delivery] | None = None
        else:
            if loop is None:
                loop = asyncio.get_running_loop()  # (Python 3.11: a getpid system call each time)
            self.future = loop.create_future()
        # Holds what the execution delivered and the caller has not taken yet: no more than the instance's window,
        # as the execution runs ahead of its slowest reader by that much at most (`next` gives the credit back).
        self.queue: asyncio.Queue[Delivery | BaseException] | None = asyncio.Queue() if stream and wanted else None
        self.taken = 0  # non-final results of a stream the caller has taken
        self.execution: Any = None
        self._cleanups: list[Callable[[], None]] = []
        self._settle: list[Callable[[], None]] | None = None  # see `on_settled`
        self.priority = 0  # the request's priority (0: the model's default level); see queue_policy
        self.timeout_us = 0  # the queue timeout the request asked for (0: none)
        self.request_id = request_id  # the client's id of the request, for messages ("": none given)
        self.gate: Any = None  # under preserve_ordering, the OrderGate that holds its answer until its turn
        # called with the final Delivery (or error) of an execution whose caller went away while it ran, before it is
        # released: the core counts it as Triton does (a success once it ran)
        self.orphaned: Callable[[Delivery | BaseException], None] | None = None
        self.on_done: Callable[[asyncio.Future[Delivery]], None] | None = None  # see `watch`
        self.reentry: Reentry | None = None  # a call back into its own model (see Reentry); None for nearly all

    def watch(self, callback: Callable[[asyncio.Future[Delivery]], None]) -> None:
        """Call `callback(future)` once a unary job's `future` is done: at once when the job delivers its result or
        fails (in the same loop pass, not from a done callback of the future one pass later); not when the future was
        cancelled by its caller. A future already done has it called from a done callback, as asyncio does."""
        future = self.future
        assert future is not None
        if future.done():
            future.add_done_callback(callback)
        else:
            self.on_done = callback

    def _answered(self, callback: Callable[[asyncio.Future[Delivery]], None]) -> None:
        """The job has ended with its future done: `watch`'s callback, now."""
        try:
            callback(self.future)  # type: ignore[arg-type]  # watch() asserted it
        except Exception:  # noqa: BLE001 - as asyncio logs a done callback's error: the other jobs still get theirs
            logger.exception("a job's done callback failed")

    def on_finish(self, cleanup: Callable[[], None]) -> None:
        """Run `cleanup` once when the job ends (at once if it has ended)."""
        if self.state == DONE:
            cleanup()
        else:
            self._cleanups.append(cleanup)

    def on_settled(self, cleanup: Callable[[], None]) -> None:
        """Run `cleanup` once the job has ended and no instance can still work on it: at its end, before `on_finish`'s
        cleanups; but when its execution was given up while its instance ran on (`detach_settled`: an execution timeout),
        once that instance has answered or is gone. What an instance may still write into (client regions) is released
        here."""
        if self.state == DONE:
            cleanup()
        elif self._settle is None:
            self._settle = [cleanup]
        else:
            self._settle.append(cleanup)

    def detach_settled(self) -> list[Callable[[], None]] | None:
        """The `on_settled` cleanups, taken away from the job's end: its execution is failed while its instance may go
        on with it, and runs them once the instance is over with it."""
        settle, self._settle = self._settle, None
        return settle

    @property
    def wanted(self) -> bool:
        """Whether anyone still waits for this job's results."""
        if self.abandoned:
            return False
        return self.future is None or not self.future.done()

    async def next(self) -> Delivery | BaseException:
        """A streaming job's next item: a Delivery, or the error that ends the job. Taking a result lets its
        execution run one further ahead (the credit of a stream)."""
        assert self.queue is not None
        item = await self.queue.get()
        if type(item) is Delivery and not item.final:
            self.taken += 1
            execution = self.execution
            if execution is not None:
                execution.consumed()
        return item

    def deliver(self, delivery: Delivery) -> None:
        """Hand a result to the caller, or release it if the caller is gone; the final one ends the job."""
        if self.state == DONE:
            _release(delivery.result)
            return
        if self.gate is not None and delivery.final:
            self.gate.hold(self, delivery)
            return
        if not self.wanted:
            if self.orphaned is not None and delivery.final:
                self.orphaned(delivery)
            _release(delivery.result)
        elif self.queue is not None:
            result = delivery.result
            self.queue.put_nowait(result if isinstance(result, BaseException) else delivery)
        else:
            assert self.future is not None
            if isinstance(delivery.result, BaseException):
                self.future.set_exception(delivery.result)
            else:
                self.future.set_result(delivery)
            callback = self.on_done
            if callback is not None:
                self.on_done = None
                if delivery.final:
                    self.finish()
                self._answered(callback)
                return
        if delivery.final:
            self.finish()

    def fail(self, error: BaseException) -> None:
        """End the job with `error` (the caller gets it if it still waits)."""
        if self.state == DONE:
            return
        if self.gate is not None:
            self.gate.hold(self, error)
            return
        if self.wanted:
            if self.queue is not None:
                self.queue.put_nowait(error)
            else:
                assert self.future is not None
                self.future.set_exception(error)
                callback = self.on_done
                if callback is not None:
                    self.on_done = None
                    self.finish()
                    self._answered(callback)
                    return
        elif self.orphaned is not None:
            self.orphaned(error)
        self.finish()

    def abandon(self) -> None:
        """The caller went away: results that reached it but were never read are released now, later ones on
        arrival. The job itself ends when its execution does (or at once if it never started)."""
        self.abandoned = True
        future = self.future
        if future is not None and future.done() and not future.cancelled():
            if future.exception() is None:  # retrieving the exception also keeps asyncio from warning about it
                _release(future.result().result)
        if self.queue is not None:
            while not self.queue.empty():
                item = self.queue.get_nowait()
                if isinstance(item, Delivery):
                    _release(item.result)

    def finish(self) -> None:
        if self.state == DONE:
            return
        self.state = DONE
        self.execution = None
        self.on_done = None  # (a job that ends without its future done has nothing to answer)
        self.payload = None  # its tensors may be large: a withdrawn job waiting in the queue must not keep them
        settle = self._settle
        if settle is not None:
            self._settle = None
            for cleanup in settle:
                cleanup()
        cleanups, self._cleanups = self._cleanups, []
        for cleanup in cleanups:
            cleanup()


def _release(result: Any) -> None:
    release = getattr(result, "release", None)
    if release is not None:
        release()
