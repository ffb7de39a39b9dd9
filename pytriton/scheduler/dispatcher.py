"""Hands a model's jobs to its instances: one execution path, with or without dynamic batching.

Jobs wait in one FIFO queue (under a model's queue policy: one per priority level, see queue_policy).
Whenever an instance has room, the queue's head is started on it: alone
without batching, or with the jobs behind it up to max_batch_size (in batch elements) with a dynamic
batcher, waiting up to max_queue_delay_microseconds for more when the batch is smaller than the largest
preferred size. The most recently freed instance is used first (its caches are warm). Without batching (and
without a queue policy) an instance may hold `pipeline_depth` executions, so the next one already waits in its socket
when it finishes.

An instance's room is owned by the execution, never by a caller: it is given back when the execution ends —
answered, failed, the worker gone, or timed out — whatever the callers did meanwhile. A caller that goes
away only abandons its job (`withdraw`): a queued job leaves the queue without running, a running one has
its results released on arrival. Nothing here awaits; every transition happens in a callback.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import logging
import time
from collections.abc import Sequence
from typing import Any, Callable

from pytriton.config.env import DEFAULT_PIPELINE_DEPTH
from pytriton.exceptions import ServerError, invalid_arg, unavailable
from pytriton.scheduler.instance import ExecutionControl, Instance, InstanceGoneError
from pytriton.scheduler.job import (
    DONE,
    NO_RESULT,
    QUEUED,
    RESCHEDULED,
    RUNNING,
    Delivery,
    ExecutionStats,
    Job,
    Reentry,
    _release,
)
from pytriton.scheduler.ordering import OrderGate
from pytriton.scheduler.queue_policy import PolicyQueue, QueueRules, compacted

logger = logging.getLogger("pytriton.scheduler")


@dataclasses.dataclass(frozen=True)
class BatchPolicy:
    """Dynamic batching of one model (max_batch_size > 0 and a dynamic batcher configured)."""

    max_batch_size: int
    max_queue_delay_us: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()


def _any_marker(results: list[Any]) -> bool:
    """Whether a result is NO_RESULT or RESCHEDULED (the results are then delivered one by one)."""
    for result in results:
        if result is NO_RESULT or result is RESCHEDULED:
            return True
    return False


# Triton's words (its core's InferenceRequest) for a request released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE by a
# model without iterative sequences
RESCHEDULE_REFUSED = ("Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not "
                      "configured to handle such a flag.")


class _Execution:
    """One batch of jobs on one instance; the `ExecutionSink` the instance reports to."""

    __slots__ = ("scheduler", "instance", "jobs", "started_ns", "done", "timer", "control", "delivered", "total",
                 "progress_ns", "late", "rescheduled")

    def __init__(self, scheduler: ModelScheduler, instance: Instance, jobs: list[Job]):
        self.scheduler = scheduler
        self.instance = instance
        self.jobs = jobs
        self.started_ns = self.progress_ns = time.perf_counter_ns()  # progress: when it began, or last answered
        self.done = False
        self.timer: asyncio.TimerHandle | None = None
        self.control: ExecutionControl | None = None  # None once cancelled
        self.delivered = 0  # results of a stream delivered before its final one
        self.total = ExecutionStats(jobs[0].batch_size if len(jobs) == 1 else sum(job.batch_size for job in jobs))
        # Failed while its instance may go on with it (`linger`): its jobs' `on_settled` cleanups, run once the instance
        # is over with it (its final answer, or it is gone)
        self.late: list[list[Callable[[], None]]] | None = None
        # Jobs the instance gave back to run again (RESCHEDULED): handed to the scheduler when the execution ends
        # (`ModelScheduler._take_back`); from then on this execution delivers them nothing
        self.rescheduled: list[Job] | None = None

    def deliver(self, results: list[Any], stats: ExecutionStats, final: bool = True,
                finals: Sequence[bool] | None = None) -> None:
        if self.done:
            for result in results:
                _release(result)
            if final and self.late is not None:
                self._settled()
            return
        if len(results) != len(self.jobs) or (finals is not None and len(finals) != len(self.jobs)):
            for result in results:
                _release(result)
            if not final:  # the instance goes on with it
                self.linger()
            self.fail(unavailable(f"model instance '{self.instance.label}' answered {len(results)} results for "
                                  f"{len(self.jobs)} requests"))
            return
        self.scheduler._delivering(self, results)  # (before the execution ends and the instance takes more)
        plain = finals is None and self.rescheduled is None and not _any_marker(results)
        if not plain:
            for job, result in zip(self.jobs, results):
                if result is RESCHEDULED and job.execution is self:
                    if self.rescheduled is None:
                        self.rescheduled = []
                    if job not in self.rescheduled:
                        self.rescheduled.append(job)
        total = self.total
        stats.batch_size = total.batch_size
        total.compute_input_ns += stats.compute_input_ns
        total.compute_infer_ns += stats.compute_infer_ns
        total.compute_output_ns += stats.compute_output_ns
        if final:
            self._end()
            self.scheduler._on_execution(total)
        else:
            self.delivered += 1
            self.progress_ns = time.perf_counter_ns()
            if self.scheduler.execution_timeout_s is not None:  # a stream: the timeout runs from its last response
                if self.timer is not None:
                    self.timer.cancel()
                self.timer = self.scheduler._arm_timeout(self)
        if plain:  # (all answered in step)
            for job, result in zip(self.jobs, results):
                job.deliver(Delivery(result, stats, self.started_ns - job.enqueued_ns, final))
            return
        rescheduled = self.rescheduled or ()
        for index, (job, result) in enumerate(zip(self.jobs, results)):
            last = final or (finals is not None and finals[index])
            if job in rescheduled:  # (given back to the scheduler, or to be when this execution ends)
                if result is not RESCHEDULED:
                    _release(result)
                if job.execution is self and not final:
                    job.taken += 1  # (it reads nothing more of this execution)
                continue
            if result is NO_RESULT:
                if last:
                    job.deliver(Delivery(None, stats, self.started_ns - job.enqueued_ns, True))
                elif job.state != DONE:
                    job.taken += 1  # nothing for this caller in this message: as good as taken
                continue
            job.deliver(Delivery(result, stats, self.started_ns - job.enqueued_ns, last))
        if not final:  # what was skipped counts as taken and finished callers read no more: the slowest may be ahead
            self.consumed()

    def fail(self, error: BaseException, stats: ExecutionStats | None = None) -> None:
        if self.done:
            if self.late is not None:  # (the instance is gone, or failed the execution it was still running)
                self._settled()
            return
        self.rescheduled = None  # (a request given back before the execution failed hears its error too)
        self._end()
        if isinstance(error, ServerError):
            error.failure_reason = "BACKEND"  # (Triton's reason for a request whose execution failed)
        if stats is not None:  # the model ran (and raised): an execution of this batch, as Triton counts it
            total = self.total
            total.compute_input_ns += stats.compute_input_ns
            total.compute_infer_ns += stats.compute_infer_ns
            total.compute_output_ns += stats.compute_output_ns
            self.scheduler._on_execution(total)
        for job in self.jobs:
            job.fail(error)

    def linger(self) -> None:
        """The execution is about to fail while its instance may still run it (and write into its requests' client
        regions): what its jobs release once no instance can work on them (`Job.on_settled`) waits for the instance's
        last word on it, its final answer or its end."""
        late = [settle for job in self.jobs if (settle := job.detach_settled()) is not None]
        if late:
            self.late = late

    def _settled(self) -> None:
        late, self.late = self.late, None
        for settle in late or ():
            for cleanup in settle:
                cleanup()

    def _end(self) -> None:
        self.done = True
        # The instance's call and this execution refer to each other (`control`, its sink): without this the pair,
        # its jobs and their results would wait for the cyclic garbage collector (a collection every few hundred
        # requests, scanning every young object: ~10 % of a small request's CPU at high concurrency).
        self.control = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.rescheduled:
            self.scheduler._take_back(self)
        self.scheduler._execution_ended(self)

    def _slowest(self) -> int:
        """Results of this stream taken by its slowest caller still reading (all delivered when none is). A caller
        whose request has had its last result (a batched stream answers each request on its own) reads no more of it:
        what it has not read yet was sent within the window."""
        taken = self.delivered
        for job in self.jobs:
            if job.taken < taken and job.wanted and job.state != DONE:
                taken = job.taken
        return taken

    def consumed(self) -> None:
        """A caller took a result of this stream: the instance may run further ahead if it was the slowest. One
        execution serves all its jobs in step, so the slowest reader paces it (callers who left do not count)."""
        control = self.control
        if control is None or self.done:
            return
        control.consumed(self._slowest())
        if self.timer is None and self.scheduler.execution_timeout_s is not None:  # it waited for its readers
            self.timer = self.scheduler._arm_timeout(self)

    def waits_for_readers(self) -> bool:
        """A stream that has run its window ahead of its slowest reader: not stuck, it waits for them."""
        return self.delivered > self._slowest() and self.control is not None

    def abandoned(self, job: Job) -> None:
        """A job of this execution lost its caller: the instance is told (the model may ask `is_cancelled()`), and a
        stream is asked to stop early once none is left; until then the slowest reader may be another one."""
        if self.done or self.control is None:
            return
        if all(not job.wanted or job.state == DONE for job in self.jobs):  # (nothing more for the finished ones)
            control, self.control = self.control, None
            control.cancel()
            return
        cancel_requests = getattr(self.control, "cancel_requests", None)
        if cancel_requests is not None:
            cancel_requests([self.jobs.index(job)])
        if self.delivered:
            self.consumed()

    def expired(self) -> None:
        self.timer = None
        if self.done:
            return
        if self.waits_for_readers():
            return  # a stream that waits for a reader who does not read is not stuck; its clock runs once they read
        scheduler = self.scheduler
        reason = (f"model '{scheduler.model_name}' instance '{self.instance.label}' did not finish an execution within "
                  f"the execution timeout of {scheduler.execution_timeout_s:g} s")
        logger.error("%s; killing the instance", reason)
        scheduler._instance_stuck(self, reason)


class ModelScheduler:
    """The queue and the instances of one model.

    `submit` queues a job (or starts it at once when an instance has room); `withdraw` is called when the
    job's caller gives up. Instances come and go through `add_instance` / `remove_instance` (the instance
    source calls them); `set_unavailable` fails who waits when no instance can come back.

    `stall_s` (0: never): the model reports not ready while requests wait and every instance has gone that long
    without progress in the execution it runs (no answer, no streamed response) — nothing can take the work, as
    when executions wait for each other through BLS requests.
    """

    def __init__(
        self,
        model_name: str,
        batching: BatchPolicy | None = None,
        pipeline_depth: int = DEFAULT_PIPELINE_DEPTH,
        execution_timeout_s: float | None = None,
        on_execution: Callable[[ExecutionStats], None] | None = None,
        queueing: QueueRules | None = None,
        preserve_ordering: bool = False,
        stall_s: float = 0.0,
    ):
        self.model_name = model_name
        self.stall_ns = int(stall_s * 1e9)
        self.batching = batching
        self.execution_timeout_s = execution_timeout_s or None
        self.on_execution = on_execution
        # (under a queue policy every job not running waits in its queue, where its bound, priority and timeout apply:
        # as in Triton, whose queue holds every request not executing)
        self._depth = 1 if batching is not None or queueing is not None else max(1, pipeline_depth)
        if batching is not None:
            preferred = [p for p in batching.preferred_batch_sizes if 0 < p <= batching.max_batch_size]
            self._preferred = set(preferred)
            self._target = max(preferred) if preferred else batching.max_batch_size
            self._delay_ns = batching.max_queue_delay_us * 1000
        self._loop = asyncio.get_running_loop()
        self._load: dict[Any, int] = {}  # instance -> executions in flight on it
        self._free: list[Any] = []  # instances with room, least loaded last (the most recently freed idle one)
        # instance -> its executions in the order it received them (it runs them in that order)
        self._running: dict[Any, dict[_Execution, None]] = {}
        # Jobs that wait: one FIFO, or under a queue policy (priority levels, max queue size, timeouts) its queues
        self._queue: Any = collections.deque() if queueing is None else PolicyQueue(
            queueing, self._reject, reordered=self._reordered)
        self._withdrawn = 0  # jobs in the queue whose caller went away (skipped when reached)
        self._queued_weight = 0  # batch elements of the jobs that wait (what the queue delay compares with its target)
        # The signature every queued job has, unless `_mixed` (a job of another was queued since the queue was last
        # empty or all of one kind): `_batch_closed` looks through the queue only then.
        self._queue_signature: Any = None
        self._mixed = False
        self._timer: asyncio.TimerHandle | None = None
        self._unavailable: str | None = None
        self._scheduling = False  # _schedule is on the stack (an execution that fails at once must not recurse)
        # preserve_ordering (a non-decoupled model): answers handed on in the order their jobs started
        self._gate = OrderGate() if preserve_ordering else None
        # A job may start without passing through the queue (not where a subclass schedules in its own way)
        own_scheduling = type(self)._schedule_now is not ModelScheduler._schedule_now
        self._direct = batching is None and queueing is None and not own_scheduling

    # ---- state ---------------------------------------------------------------------------------
    @property
    def instance_count(self) -> int:
        return len(self._load)

    @property
    def queue_size(self) -> int:
        """Jobs waiting for an instance (Triton's pending request count)."""
        return len(self._queue) - self._withdrawn

    @property
    def executions_in_flight(self) -> int:
        return sum(len(executions) for executions in self._running.values())

    @property
    def pending_count(self) -> int:
        """Requests waiting to run (Triton's pending request count): those in the queue, and those handed to an
        instance that has not started them yet (pipelined behind the execution it runs, which may be waiting itself,
        e.g. for a BLS request)."""
        behind = 0
        for executions in self._running.values():
            if len(executions) > 1:
                for execution in itertools.islice(executions, 1, None):
                    behind += sum(1 for job in execution.jobs if job.state != DONE and not job.abandoned)
        return self.queue_size + behind

    def running(self) -> list[_Execution]:
        """The execution each busy instance runs now (not those waiting behind it)."""
        return [next(iter(executions)) for executions in self._running.values() if executions]

    def stalled_ns(self) -> int:
        """How long the execution running with the least recent progress has gone without any (since it began, or
        since its last streamed response); 0 when none runs (a stream waiting for its readers is not stalled)."""
        now = time.perf_counter_ns()
        return max((now - e.progress_ns for e in self.running() if not e.waits_for_readers()), default=0)

    @property
    def ready(self) -> bool:
        """At least one instance can take work: one is up, and not every one is stalled while requests wait."""
        return bool(self._load) and not (self.stall_ns and self._wedged())

    def _wedged(self) -> bool:
        """Requests wait, and every instance runs an execution that has made no progress for `stall_ns`."""
        if not self.pending_count:
            return False
        now = time.perf_counter_ns()
        for executions in self._running.values():
            if not executions:
                return False  # an idle instance
            head = next(iter(executions))
            if now - head.progress_ns < self.stall_ns or head.waits_for_readers():
                return False
        return bool(self._running)

    # ---- instances -----------------------------------------------------------------------------
    def add_instance(self, instance: Any) -> None:
        if instance in self._load:
            return
        self._unavailable = None
        self._load[instance] = 0
        self._running[instance] = {}
        self._free.append(instance)
        self._schedule()

    def remove_instance(self, instance: Any) -> None:
        """The instance is gone (its executions are failed by the instance itself, as its worker went)."""
        self._load.pop(instance, None)
        running = self._running.pop(instance, None)
        if instance in self._free:
            self._free.remove(instance)
        if running and self.execution_timeout_s is not None:
            for execution in running:  # those that waited behind another: their clock runs from now on
                if execution.timer is None and not execution.done:
                    execution.timer = self._arm_timeout(execution)

    def set_unavailable(self, reason: str) -> None:
        """No instance can come back (e.g. the callable no longer loads): fail who waits, and later callers."""
        self._unavailable = reason
        if not self._load:
            self.fail_all(reason)

    def _instance_stuck(self, execution: _Execution, reason: str) -> None:
        """`execution` outlived the execution timeout: its instance leaves (before the execution fails, so that its
        room never goes to a job that waits), the execution fails, and the instance is killed."""
        instance = execution.instance
        running = self._running.get(instance)
        if running is not None:
            running.pop(execution, None)
        self.remove_instance(instance)
        if execution.control is not None:  # an instance that cannot be killed is at least told to drop the call
            control, execution.control = execution.control, None
            control.cancel()
        execution.linger()  # its client regions stay held until the instance has answered or is gone
        execution.fail(unavailable(reason))
        try:
            instance.kill(reason)
        except Exception:  # noqa: BLE001 - the instance is out of the pool either way
            logger.exception("could not kill model instance '%s'", instance.label)

    def _instance_gone(self, execution: _Execution, error: BaseException) -> None:
        """The instance went away before it took `execution` (its source will remove it): it leaves now, and the
        jobs, which never started, go back to the head of the queue for another instance."""
        instance = execution.instance
        logger.warning("model instance '%s' can take no work (%s); its requests wait for another", instance.label,
                       error)
        running = self._running.get(instance)
        if running is not None:
            running.pop(execution, None)
        self.remove_instance(instance)
        execution.done = True
        for job in reversed(execution.jobs):
            job.state = QUEUED
            job.execution = None
            self._queue.appendleft(job)
            self._queued_weight += job.weight
            self._mixed = True  # (rare: `_batch_closed` looks)

    # ---- jobs ----------------------------------------------------------------------------------
    def submit(self, job: Job) -> None:
        """Queue `job`, or start it now if an instance has room and nobody waits before it."""
        if self._unavailable is not None and not self._load:
            raise unavailable(self._unavailable)
        if job.reentry is not None:
            self._submit_reentry(job, job.reentry)
            return
        job.enqueued_ns = time.perf_counter_ns()
        if self._direct and self._free and not self._queue and not self._scheduling:
            # No batcher, no queue policy, nobody waits and an instance has room: the job starts now, as
            # `_schedule` would start it, without passing through the queue.
            self._scheduling = True
            try:
                started = self._start([job])
            finally:
                self._scheduling = False
            if started is None and self._queue:  # its instance was gone: the job waits at the head for another
                self._schedule()
            return
        if not self._queue:
            self._queue_signature = job.signature
        elif job.signature != self._queue_signature:
            self._mixed = True
        self._queue.append(job)  # (under a queue policy: UNAVAILABLE when the job's level is full)
        self._queued_weight += job.weight
        if self._free:
            self._schedule()

    def _submit_reentry(self, job: Job, reentry: Reentry) -> None:
        """A call back into this model from an execution of its own call chain (see Reentry): it starts now, alone,
        on an idle instance that does not wait for it, or fails at once. It never queues: the instances it would wait
        for may be waiting for it (directly, or through other models' instances)."""
        job.enqueued_ns = time.perf_counter_ns()
        scheduling, self._scheduling = self._scheduling, True  # (nothing else takes the job from the queue meanwhile)
        try:
            while True:
                instance = next((i for i in reversed(self._free)  # (the most recently freed idle one first)
                                 if not self._load[i] and i.label not in reentry.blocked), None)
                if instance is None:
                    raise unavailable(self._no_free_instance(reentry))
                if self._start([job], instance) is not None or job.state != QUEUED:
                    break
                # its instance was gone (`_instance_gone` put the job back at the head of the queue): try another
                self._queue.popleft()
                self._queued_weight -= job.weight
        finally:
            self._scheduling = scheduling
        if self._queue and self._free:  # (what an execution that ended at once left to start)
            self._schedule()

    def _no_free_instance(self, reentry: Reentry) -> str:
        labels = sorted(i.label for i in self._load)
        waiting = [label for label in labels if label in reentry.blocked]
        busy = len(labels) - len(waiting)
        why = []
        if waiting:
            names = ", ".join(f"'{label}'" for label in waiting)
            why.append(f"instance{'s' if len(waiting) > 1 else ''} {names} wait{'' if len(waiting) > 1 else 's'} for "
                       "this call")
        if busy:
            why.append(f"{busy} other{'s' if busy > 1 else ''} busy")
        if not labels:
            why.append("none is up")
        return (f"{reentry.cycle}: model '{self.model_name}' has no free instance ({'; '.join(why)}); a call back into "
                "a model on its own call chain runs only on an idle instance, it does not wait for one")

    def withdraw(self, job: Job) -> None:
        """The caller of `job` went away."""
        if job.abandoned:
            return
        job.abandon()
        if job.state == QUEUED:
            self._withdrawn += 1
            self._queued_weight -= job.weight
            job.finish()  # it never runs; what it holds is released now
            if self._withdrawn > 64 and self._withdrawn * 2 > len(self._queue):
                self._queue = compacted(self._queue)
                self._withdrawn = 0
        elif job.state == RUNNING and job.execution is not None:
            job.execution.abandoned(job)
        if job.gate is not None:  # (under preserve_ordering) it holds back no later answer
            job.gate.drop(job)

    def _reject(self, job: Job, error: BaseException) -> None:
        """The queue policy ends a queued job (it waited past its timeout): it never runs, as if withdrawn."""
        self._withdrawn += 1
        self._queued_weight -= job.weight
        if isinstance(error, ServerError):
            error.failure_reason = "REJECTED"  # (Triton's reason for a request its queue policy rejected)
        job.fail(error)
        if self._free and self._queue:  # (what waited behind it may make a batch now, as in Triton)
            self._schedule()

    def _reordered(self) -> None:
        """A DELAY job moved behind its level's others at its timeout: those may make a batch now."""
        if self._free and self._queue:
            self._schedule()

    def _pop_withdrawn(self) -> None:
        queue = self._queue
        while queue and queue[0].state != QUEUED:
            queue.popleft()
            self._withdrawn -= 1

    def _schedule(self) -> None:
        """Start executions while instances have room and jobs wait (respecting the batcher's queue delay)."""
        if self._scheduling:
            return
        self._scheduling = True
        try:
            self._schedule_now()
        finally:
            self._scheduling = False

    def _schedule_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._free:
            self._pop_withdrawn()
            if not self._queue:
                return
            if self.batching is None:
                job = self._queue.popleft()
                self._queued_weight -= job.weight
                self._start([job])
                continue
            if self._delay_ns:
                wait_ns = self._queue[0].enqueued_ns + self._delay_ns - time.perf_counter_ns()
                if wait_ns > 0:  # (the delay not over: a preferred batch the queue holds goes now, cut at its size)
                    cut = self._preferred_cut() if self._preferred else 0
                    if cut:
                        self._start(self._take_batch(cut))
                        continue
                    queued = self._queued_weight
                    if queued < self._target and not self._batch_closed():
                        self._timer = self._loop.call_later(wait_ns / 1e9, self._schedule)
                        return
            self._start(self._take_batch())

    def _batch_closed(self) -> bool:
        """Whether a queued job cannot join the batch the first one starts (another signature: other inputs, or other
        shapes): that batch can grow no more, so it starts now instead of after the queue delay, as Triton's dynamic
        batcher sends it."""
        queue = self._queue
        if not self._mixed or len(queue) < 2:
            return False
        head = queue[0].signature
        if any(job.signature != head and job.state == QUEUED for job in queue):
            return True
        self._queue_signature, self._mixed = head, False  # (all of one kind again)
        return False

    def _preferred_cut(self) -> int:
        """The batch size to start now before the queue delay is over, as Triton's dynamic batcher picks it: walking
        the queue in order (jobs that batch with the first, up to max_batch_size), the largest preferred size the
        batch passes through, or where one more job would take it past the largest preferred size; 0 when neither
        is reached (the batch waits)."""
        assert self.batching is not None
        limit = self.batching.max_batch_size
        best = total = 0
        signature: Any = None
        for job in self._queue:
            if job.state != QUEUED:
                continue
            if total:
                if total + job.weight > self._target:
                    return best or total  # (the batch can grow no further within the preferred sizes)
                if total + job.weight > limit or job.signature != signature:
                    break
            else:
                signature = job.signature
            total += job.weight
            if total in self._preferred:
                best = total
        return best

    def _take_batch(self, size: int = 0) -> list[Job]:
        """The next batch: jobs that batch with the first, up to max_batch_size (or `size`, a cut the queue holds)."""
        assert self.batching is not None
        limit = size or self.batching.max_batch_size
        batch: list[Job] = []
        total = 0
        queue = self._queue
        while queue:
            job = queue[0]
            if job.state != QUEUED:
                queue.popleft()
                self._withdrawn -= 1
                continue
            if batch and (total + job.weight > limit or job.signature != batch[0].signature):
                break
            batch.append(queue.popleft())
            total += job.weight
        self._queued_weight -= total
        return batch

    def _start(self, jobs: list[Job], instance: Any = None) -> _Execution | None:
        """Start `jobs` on `instance` (one with room; default: the most recently freed); the execution, or None when it
        never started."""
        if instance is None:
            instance = self._free.pop()
        else:
            self._free.remove(instance)
        load = self._load[instance] = self._load[instance] + 1
        if load < self._depth:
            self._free.insert(0, instance)  # room for more, but idle instances go first
        execution = _Execution(self, instance, jobs)
        gate = self._gate
        for job in jobs:
            job.state = RUNNING
            job.execution = execution
            if gate is not None and job.reentry is None:
                gate.join(job)  # (not a call back into the model: jobs started before it may wait for its answer)
        running = self._running[instance]
        running[execution] = None
        try:
            control = instance.execute([job.payload for job in jobs], execution)
        except InstanceGoneError as exc:
            self._instance_gone(execution, exc)
            return None
        except Exception as exc:  # noqa: BLE001 - e.g. the request arena is full: these jobs fail
            execution.fail(exc)
            return None
        if not execution.done:  # (one that ended inside `execute` keeps no control: see _Execution._end)
            execution.control = control
        # The clock starts when the instance starts it: at once if nothing runs before it there, else when the
        # executions before it have ended (see _execution_ended).
        if self.execution_timeout_s is not None and not execution.done and next(iter(running)) is execution:
            execution.timer = self._arm_timeout(execution)
        return execution

    def _arm_timeout(self, execution: _Execution) -> asyncio.TimerHandle:
        assert self.execution_timeout_s is not None
        return self._loop.call_later(self.execution_timeout_s, execution.expired)

    def _execution_ended(self, execution: _Execution) -> None:
        """Give the execution's room on its instance back (unless the instance is gone) and start what waits."""
        instance = execution.instance
        running = self._running.get(instance)
        if running is None or execution not in running:
            return
        del running[execution]
        if running:
            head = next(iter(running))  # the instance starts it now
            head.progress_ns = time.perf_counter_ns()
            if self.execution_timeout_s is not None and head.timer is None and not head.done:
                head.timer = self._arm_timeout(head)
        load = self._load[instance] = self._load[instance] - 1
        if instance in self._free:
            self._free.remove(instance)
        if load == 0:
            self._free.append(instance)  # idle: first choice
        else:
            self._free.insert(0, instance)
        if self._queue:
            self._schedule()

    def _delivering(self, execution: _Execution, results: list[Any]) -> None:
        """Results of `execution` about to be delivered (a hook: the sequence batcher keeps implicit state)."""

    def _take_back(self, execution: _Execution) -> None:
        """`execution` ends, and its instance gave back `execution.rescheduled` to run again. Only a scheduler of
        iterative sequences runs them again; here each fails with Triton's error (Triton logs it and releases the
        request without an answer, so that its client waits forever)."""
        for job in execution.rescheduled or ():
            logger.error("model '%s': %s", self.model_name, RESCHEDULE_REFUSED)
            job.fail(invalid_arg(RESCHEDULE_REFUSED))

    def _on_execution(self, stats: ExecutionStats) -> None:
        if self.on_execution is not None:
            self.on_execution(stats)

    def fail_all(self, reason: str) -> None:
        """Fail every queued job (the model is being removed, or no instance can come back)."""
        while self._queue:
            job = self._queue.popleft()
            if job.state == QUEUED:
                job.fail(unavailable(reason))
        self._withdrawn = 0
        self._queued_weight = 0


__all__ = ["BatchPolicy", "ModelScheduler", "DONE"]
