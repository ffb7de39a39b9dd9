"""The sequence batcher: a stateful model's requests, grouped by correlation id, each sequence kept on one instance.

Every instance has batch slots (Direct: max_batch_size of them, or 1; Oldest: max_candidate_sequences). A request
flagged START takes the free slot with the lowest number (of any instance); while none is free its sequence waits in
a backlog, first come first served. Its later requests queue in its slot; the request flagged END gives the slot back
when it is dispatched, and a sequence that gets no request for max_sequence_idle_microseconds is released. An
instance runs one batch at a time, so a sequence never has two requests in flight:

- Direct: a batch holds the slots of one instance from 0 to the highest with a request waiting; a slot in between
  without one gets a not-ready request (a copy of another request, READY false, CORRID 0) whose answer is dropped.
- Oldest: the oldest waiting requests of an instance's sequences, up to max_batch_size, with the dynamic batcher's
  preferred sizes and queue delay.

Control tensors are set by the `SequenceRequests` the core hands in; the scheduler sees payloads as opaque. With
implicit state (`stateful` requests), the scheduler keeps each sequence's state between its requests: what
`keep_state` takes from a result is handed to `prepare` with the sequence's next request (None on START: the initial
state); it is dropped when the sequence ends (END dispatched, idle release, its instance gone).

Iterative sequences (`iterative_sequence`, as Triton's IterativeSequencer): a request without a correlation id gets
one of the scheduler's own (counting from 1) and starts a sequence; a request the instance gives back (RESCHEDULED)
queues again in its sequence's slot, flagged neither START nor END; a request that ends without being given back
ends its sequence (its slot goes back once the requests queued before that end have run).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pytriton.exceptions import ServerError, Status, invalid_arg, unavailable
from pytriton.model_config.sequence import SequenceBatcher, SequenceStrategy
from pytriton.scheduler.dispatcher import RESCHEDULE_REFUSED, BatchPolicy, ModelScheduler, _Execution
from pytriton.scheduler.job import QUEUED, ExecutionStats, Job

logger = logging.getLogger("pytriton.scheduler")

# The idle reaper's timer firing this late means the event loop was held up; it then waits this long once more.
_STALL_NS = 50_000_000
_STALL_GRACE_NS = 20_000_000

LOST_SEQUENCES_KEPT = 4096  # sequences ended by an instance's death whose next request is told so


class SequenceRequests(Protocol):
    """How the scheduler reads and marks a payload (the core knows what one is)."""

    def fields(self, payload: Any) -> tuple[int | str, bool, bool]:
        """(correlation id, START, END) of a request; raises if its correlation id does not fit the model."""

    def prepare(self, payload: Any, correlation_id: int | str, start: bool, end: bool) -> Any:
        """The payload with its control tensors (READY true)."""

    def null(self, payload: Any) -> Any:
        """A not-ready request shaped as `payload` (its inputs zero, READY false, CORRID 0)."""


class StatefulRequests(SequenceRequests, Protocol):
    """`SequenceRequests` of a model with implicit state (`stateful` true)."""

    stateful: bool

    def client_view(self, payload: Any) -> Any:
        """What `keep_state` needs to know of the client's request (taken before `prepare`)."""

    def prepare_state(self, payload: Any, correlation_id: int | str, start: bool, end: bool, state: Any) -> Any:
        """`prepare`, with the sequence's state as its state inputs (None: the initial state)."""

    def keep_state(self, view: Any, result: Any, state: Any) -> Any:
        """The state a result carries (else `state`), its state outputs taken out of what the client gets."""


@dataclasses.dataclass(eq=False, slots=True)
class _Entry:
    job: Job
    correlation_id: int | str
    start: bool
    end: bool


@dataclasses.dataclass(eq=False)
class _Slot:
    instance: Any
    index: int
    order: int  # the instance's rank (ties between equal slot numbers)
    owner: int | str | None = None  # the sequence that holds it
    queue: collections.deque[_Entry] = dataclasses.field(default_factory=collections.deque)
    in_flight: bool = False
    gone: bool = False

    def __lt__(self, other: _Slot) -> bool:
        return (self.index, self.order) < (other.index, other.order)


@dataclasses.dataclass(eq=False)
class _Backlog:
    correlation_id: int | str
    queue: collections.deque[_Entry] = dataclasses.field(default_factory=collections.deque)


class SequenceScheduler(ModelScheduler):
    """A `ModelScheduler` whose jobs are requests of sequences (same interface for the core and instance sources)."""

    def __init__(
        self,
        model_name: str,
        policy: SequenceBatcher,
        max_batch_size: int,
        requests: SequenceRequests,
        execution_timeout_s: float | None = None,
        on_execution: Callable[[ExecutionStats], None] | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
    ):
        oldest = policy.strategy is SequenceStrategy.OLDEST
        batching = None
        if max_batch_size > 0:
            batching = BatchPolicy(max_batch_size, policy.max_queue_delay_microseconds if oldest else 0,
                                   policy.preferred_batch_size if oldest else ())
        super().__init__(model_name, batching, 1, execution_timeout_s, on_execution)
        self.policy = policy
        self.requests = requests
        self._oldest = oldest
        self._slot_count = policy.max_candidate_sequences if oldest else max(1, max_batch_size)
        self._max_batch = max(1, max_batch_size)
        self._clock = clock
        self._idle_ns = policy.max_sequence_idle_microseconds * 1000
        self._slots: dict[Any, list[_Slot]] = {}
        self._ranks = itertools.count()
        self._free_slots: list[_Slot] = []  # a heap: the lowest slot number first
        self._backlog: collections.deque[_Backlog] = collections.deque()
        self._sequences: dict[int | str, _Slot | _Backlog] = {}  # sequences not ended yet
        self._last_ns: dict[int | str, int] = {}  # when each sequence last got a request
        self._job_slot: dict[Job, _Slot] = {}  # jobs in flight
        # sequences ended by their instance's death -> why (told to their next request, once; bounded)
        self._lost: collections.OrderedDict[int | str, str] = collections.OrderedDict()
        self._reaper: asyncio.TimerHandle | None = None
        self._reaper_due = 0  # when the reaper's timer should fire (the clock's ns)
        self._after_stall = False  # the reaper was put off once because its timer fired late
        self._wait: asyncio.TimerHandle | None = None  # the timer of a batch that waits to grow
        self._stateful = bool(getattr(requests, "stateful", False))
        self._states: dict[int | str, Any] = {}  # implicit state of the sequences (after their last result)
        self._job_view: dict[Job, tuple[int | str, bool, Any]] = {}  # jobs in flight -> (sequence, END, client view)
        self._iterative = policy.iterative
        self._next_id = itertools.count(1)  # the correlation ids of iterative sequences started without one
        self._iterating: dict[Job, int | str] = {}  # jobs in flight of iterative sequences (not END) -> the sequence

    # ---- state ---------------------------------------------------------------------------------
    @property
    def queue_size(self) -> int:
        slots = (entry for slots in self._slots.values() for slot in slots for entry in slot.queue)
        backlog = (entry for b in self._backlog for entry in b.queue)
        return sum(1 for entry in itertools.chain(slots, backlog) if entry.job.state == QUEUED)

    @property
    def active_sequences(self) -> int:
        """Sequences holding a slot or waiting for one (not yet ended)."""
        return len(self._sequences)

    # ---- instances -----------------------------------------------------------------------------
    def add_instance(self, instance: Any) -> None:
        if instance not in self._slots:
            rank = next(self._ranks)
            slots = [_Slot(instance, index, rank) for index in range(self._slot_count)]
            self._slots[instance] = slots
            for slot in slots:
                self._give_back(slot)
        super().add_instance(instance)

    def remove_instance(self, instance: Any) -> None:
        """The instance is gone: the sequences it held end, and their waiting requests fail."""
        super().remove_instance(instance)
        for slot in self._slots.pop(instance, []):
            slot.gone = True
            owner = slot.owner
            if owner is None and not slot.queue:
                continue
            reason = (f"sequence {owner} of model '{self.model_name}' ended: its model instance "
                      f"'{getattr(instance, 'label', instance)}' went away")
            if owner is not None:
                self._states.pop(owner, None)
            if owner is not None and self._sequences.get(owner) is slot:
                del self._sequences[owner]
                self._last_ns.pop(owner, None)
                self._lost[owner] = reason
                while len(self._lost) > LOST_SEQUENCES_KEPT:
                    self._lost.popitem(last=False)
            while slot.queue:
                slot.queue.popleft().job.fail(unavailable(reason))
            slot.owner = None
        self._free_slots = [s for s in self._free_slots if not s.gone]
        heapq.heapify(self._free_slots)

    def _instance_gone(self, execution: _Execution, error: BaseException) -> None:
        """The instance went away before it took the batch: its sequences end (their state was there)."""
        self._end_execution(execution)
        running = self._running.get(execution.instance)
        if running is not None:
            running.pop(execution, None)
        execution.done = True
        self.remove_instance(execution.instance)
        for job in execution.jobs:
            job.fail(unavailable(f"model instance '{getattr(execution.instance, 'label', '')}' of model "
                                 f"'{self.model_name}' went away: {error}"))

    # ---- jobs ----------------------------------------------------------------------------------
    def submit(self, job: Job) -> None:
        """Queue a request of a sequence in its slot (or backlog); Triton's refusals raise here."""
        if self._unavailable is not None and not self._load:
            raise unavailable(self._unavailable)
        if job.batch_size > 1:
            raise invalid_arg(f"inference request to model '{self.model_name}' must specify batch-size 1 due to "
                              "requirements of sequence batcher")
        correlation_id, start, end = self.requests.fields(job.payload)
        if self._iterative and (correlation_id == 0 or correlation_id == ""):  # a sequence of its own
            correlation_id, start, end = next(self._next_id), True, False
        if correlation_id == 0 or correlation_id == "":
            raise invalid_arg(f"inference request to model '{self.model_name}' must specify a non-zero or non-empty "
                              "correlation ID")
        target = self._sequences.get(correlation_id)
        if target is None and not start:
            lost = self._lost.pop(correlation_id, None)
            if lost is not None:
                raise unavailable(f"{lost}; send its requests again from the one flagged START")
            raise invalid_arg(f"inference request for sequence {correlation_id} to model '{self.model_name}' must "
                              "specify the START flag on the first request of the sequence")
        if start:
            self._lost.pop(correlation_id, None)
            if target is None:
                self._states.pop(correlation_id, None)
        if target is not None and start:
            logger.warning("sequence %s for model '%s' has a conflict. The previous sequence did not end before this "
                           "sequence start. Previous sequence will be terminated early.", correlation_id,
                           self.model_name)
        if job.reentry is not None:  # a call back into this model from its own call chain: it must not wait
            slot = target if isinstance(target, _Slot) else (
                self._free_slots[0] if target is None and self._free_slots else None)
            if (slot is None or slot.queue or self._load.get(slot.instance)
                    or getattr(slot.instance, "label", None) in job.reentry.blocked):
                raise unavailable(self._no_free_instance(job.reentry))
        job.enqueued_ns = time.perf_counter_ns()
        self._last_ns[correlation_id] = self._clock()
        if target is None:
            if self._free_slots:
                target = heapq.heappop(self._free_slots)
                target.owner = correlation_id
            else:
                target = _Backlog(correlation_id)
                self._backlog.append(target)
            self._sequences[correlation_id] = target
        target.queue.append(_Entry(job, correlation_id, start, end))
        if end:
            del self._sequences[correlation_id]
            self._last_ns.pop(correlation_id, None)
        elif self._reaper is None:
            self._arm_reaper(self._idle_ns)
        if isinstance(target, _Slot) and target.instance in self._free:
            self._schedule()

    def withdraw(self, job: Job) -> None:
        """The caller went away: a queued request is skipped when reached, and, as in Triton, its sequence ends: the
        sequence's other queued requests are cancelled and its slot goes back once what runs has run (a backlogged
        sequence leaves the backlog). An iterative sequence's request is only skipped (an END still ends it)."""
        if job.abandoned:
            return
        if job.state == QUEUED:
            target = self._sequence_of(job)
            job.abandon()
            job.finish()
            if target is not None:
                self._cancel_sequence(*target)
            return
        super().withdraw(job)

    def _sequence_of(self, job: Job) -> tuple[int | str, _Slot | _Backlog] | None:
        """The sequence a queued request waits in (its correlation id, its slot or backlog), if not iterative."""
        if self._iterative or job.payload is None:
            return None
        correlation_id = self.requests.fields(job.payload)[0]
        target = self._sequences.get(correlation_id)
        if target is None or not any(e.job is job for e in target.queue):
            return None  # (its sequence ended already, or a new one of that id started)
        return correlation_id, target

    def _cancel_sequence(self, correlation_id: int | str, target: _Slot | _Backlog) -> None:
        for entry in target.queue:
            if entry.correlation_id == correlation_id and entry.job.state == QUEUED:
                cancelled = ServerError(Status.CANCELLED, f"sequence {correlation_id} of model '{self.model_name}' "
                                                          "was cancelled: a request of it was cancelled")
                cancelled.failure_reason = "CANCELED"
                entry.job.fail(cancelled)
        if isinstance(target, _Slot):
            self._end_sequence(correlation_id, target)
        else:
            self._backlog.remove(target)
            del self._sequences[correlation_id]
            self._last_ns.pop(correlation_id, None)
            self._states.pop(correlation_id, None)

    def fail_all(self, reason: str) -> None:
        for slots in self._slots.values():
            for slot in slots:
                while slot.queue:
                    slot.queue.popleft().job.fail(unavailable(reason))
                if slot.owner is not None:
                    slot.owner = None
                    if not slot.in_flight:
                        self._give_back(slot)
        while self._backlog:
            for entry in self._backlog.popleft().queue:
                entry.job.fail(unavailable(reason))
        self._sequences.clear()
        self._last_ns.clear()
        self._states.clear()
        super().fail_all(reason)

    # ---- slots ---------------------------------------------------------------------------------
    def _give_back(self, slot: _Slot) -> None:
        """A slot whose sequence ended: the first backlogged sequence takes it, else it is free."""
        slot.owner = None
        if slot.gone:
            return
        while self._backlog:
            backlog = self._backlog.popleft()
            slot.queue.extend(backlog.queue)
            if self._sequences.get(backlog.correlation_id) is backlog:  # not ended yet: later requests go there
                self._sequences[backlog.correlation_id] = slot
                slot.owner = backlog.correlation_id
            if slot.queue:
                return
        heapq.heappush(self._free_slots, slot)

    def _head(self, slot: _Slot) -> _Entry | None:
        """The slot's next request still wanted (requests whose caller left are dropped; their END still counts)."""
        while slot.queue:
            entry = slot.queue[0]
            if entry.job.state == QUEUED:
                return entry
            slot.queue.popleft()
            if entry.end:
                self._states.pop(entry.correlation_id, None)
            if entry.end and not slot.queue:
                self._give_back(slot)
        return None

    def _arm_reaper(self, delay_ns: int) -> None:
        self._reaper_due = self._clock() + max(delay_ns, 0)
        self._reaper = self._loop.call_later(max(delay_ns, 0) / 1e9, self._reap_on_time)

    def _reap_on_time(self) -> None:
        """The reaper's timer: when it fires late, the event loop was held up (an overloaded machine) and the next
        requests of sequences that look idle may be waiting unread in their sockets; give the loop one short turn to
        read them before deciding (once, then reap whatever the delay)."""
        late = self._clock() - self._reaper_due
        if late > _STALL_NS and not self._after_stall:
            self._after_stall = True
            self._arm_reaper(_STALL_GRACE_NS)
            return
        self._after_stall = False
        self.reap()

    def reap(self) -> None:
        """Release the slots of sequences idle for max_sequence_idle_microseconds (nothing queued or running)."""
        if self._reaper is not None:
            self._reaper.cancel()
        self._reaper = None
        now = self._clock()
        next_ns = self._idle_ns
        for correlation_id, last in list(self._last_ns.items()):
            target = self._sequences.get(correlation_id)
            remaining = last + self._idle_ns - now
            if target is None:
                del self._last_ns[correlation_id]
                continue
            if remaining > 0 or not isinstance(target, _Slot) or target.queue or target.in_flight:
                next_ns = min(next_ns, max(remaining, 1_000_000))
                continue
            logger.info("sequence %s of model '%s' idle for more than %d us: released", correlation_id,
                        self.model_name, self._idle_ns // 1000)
            del self._sequences[correlation_id]
            del self._last_ns[correlation_id]
            self._states.pop(correlation_id, None)
            self._give_back(target)
        if self._last_ns:
            self._arm_reaper(next_ns)
        if self._free:
            self._schedule()

    # ---- batches -------------------------------------------------------------------------------
    def _schedule_now(self) -> None:
        if self._wait is not None:
            self._wait.cancel()
            self._wait = None
        for instance in list(reversed(self._free)):
            if instance not in self._free or instance not in self._slots:
                continue
            batch = self._oldest_batch(instance) if self._oldest else self._direct_batch(instance)
            if batch:
                self._dispatch(instance, batch)

    def _wait_until(self, deadline_ns: int) -> None:
        delay = deadline_ns - time.perf_counter_ns()
        if self._wait is None or self._wait.when() > self._loop.time() + delay / 1e9:
            if self._wait is not None:
                self._wait.cancel()
            self._wait = self._loop.call_later(max(delay, 0) / 1e9, self._schedule)

    def _direct_batch(self, instance: Any) -> Sequence[tuple[_Slot, _Entry | None]]:
        slots = self._slots[instance]
        # (a slot's next request is usually its first: `_head` drops those whose caller left)
        heads = [(slot.queue[0] if slot.queue[0].job.state == QUEUED else self._head(slot)) if slot.queue else None
                 for slot in slots]
        busy = [i for i, head in enumerate(heads) if head is not None]
        if not busy:
            return []
        policy = self.policy
        if (policy.max_queue_delay_microseconds and policy.minimum_slot_utilization > 0
                and len(busy) / self._slot_count < policy.minimum_slot_utilization):
            earliest = min(head.job.enqueued_ns for head in heads if head is not None)
            deadline = earliest + policy.max_queue_delay_microseconds * 1000
            if time.perf_counter_ns() < deadline:
                self._wait_until(deadline)
                return []
        return [(slots[i], heads[i]) for i in range(busy[-1] + 1)]

    def _oldest_batch(self, instance: Any) -> Sequence[tuple[_Slot, _Entry | None]]:
        ready: list[tuple[_Slot, _Entry]] = []
        for slot in self._slots[instance]:
            head = self._head(slot)
            if head is not None and not slot.in_flight:
                ready.append((slot, head))
        if not ready:
            return []
        ready.sort(key=lambda pair: pair[1].job.enqueued_ns)
        signature = ready[0][1].job.signature
        batch = [pair for pair in ready if pair[1].job.signature == signature][:self._max_batch]
        if self._delay_ns_of_oldest() and self.batching is not None:
            size = len(batch)
            if size < self._target and size not in self._preferred:
                deadline = batch[0][1].job.enqueued_ns + self._delay_ns_of_oldest()
                if time.perf_counter_ns() < deadline:
                    self._wait_until(deadline)
                    return []
        return batch

    def _delay_ns_of_oldest(self) -> int:
        return self.policy.max_queue_delay_microseconds * 1000

    def _dispatch(self, instance: Any, batch: Sequence[tuple[_Slot, _Entry | None]]) -> None:
        """Start the batch on `instance`: each request with its control tensors, not-ready requests for empty slots;
        a request flagged END gives its slot back."""
        null = None  # (the batch's not-ready payload, made once from its first request)
        jobs: list[Job] = []
        job_slot = self._job_slot
        for slot, entry in batch:
            if entry is None:  # (nobody waits for its answer: released on arrival)
                if null is None:
                    null = self.requests.null(next(e.job.payload for _, e in batch if e is not None))
                job = Job(null, 1, None, wanted=False)
            else:
                slot.queue.popleft()
                job = entry.job
                if self._stateful:
                    requests: Any = self.requests
                    state = None if entry.start else self._states.get(entry.correlation_id)
                    if entry.end:  # the sequence's last request: nothing to keep after it
                        self._states.pop(entry.correlation_id, None)
                    self._job_view[job] = (entry.correlation_id, entry.end, requests.client_view(job.payload))
                    job.payload = requests.prepare_state(job.payload, entry.correlation_id, entry.start, entry.end,
                                                         state)
                else:
                    job.payload = self.requests.prepare(job.payload, entry.correlation_id, entry.start, entry.end)
            slot.in_flight = True
            job_slot[job] = slot
            if self._iterative and entry is not None and not entry.end:
                self._iterating[job] = entry.correlation_id
            jobs.append(job)
        for slot, entry in batch:
            if entry is not None and entry.end and not slot.queue:  # the sequence ended: its slot goes back
                self._give_back(slot)
        self._start(jobs, instance)

    def _delivering(self, execution: _Execution, results: list[Any]) -> None:
        """Keep the state each result carries for its sequence's next request (before that one can start)."""
        if not self._stateful:
            return
        requests: Any = self.requests
        for job, result in zip(execution.jobs, results):
            view = self._job_view.get(job)
            if view is None:
                continue
            correlation_id, end, client = view
            state = requests.keep_state(client, result, self._states.get(correlation_id))
            if not end and state is not None:  # (its END may be queued already: it takes this state)
                self._states[correlation_id] = state

    def _end_execution(self, execution: _Execution) -> None:
        job_slot = self._job_slot
        rescheduled = execution.rescheduled or ()
        for job in execution.jobs:
            if self._stateful:
                self._job_view.pop(job, None)
            slot = job_slot.pop(job, None)
            if slot is not None:
                slot.in_flight = False
            if self._iterating:
                correlation_id = self._iterating.pop(job, None)
                if correlation_id is not None and slot is not None and job not in rescheduled:
                    self._end_sequence(correlation_id, slot)

    def _take_back(self, execution: _Execution) -> None:
        """Requests the instance gave back: in an iterative sequence each queues again in its slot (one whose caller
        left ends instead, and with it its sequence); elsewhere they fail as in any model."""
        if not self._iterative:
            super()._take_back(execution)
            return
        rescheduled = execution.rescheduled or []
        for job in list(rescheduled):
            slot = self._job_slot.get(job)
            correlation_id = self._iterating.get(job)
            if slot is None or correlation_id is None or not job.wanted:
                rescheduled.remove(job)  # (it ends: `_end_execution` ends its sequence)
                if correlation_id is None and job.wanted:  # (flagged END: Triton has nothing to queue it again in)
                    logger.error("model '%s': %s", self.model_name, RESCHEDULE_REFUSED)
                    job.fail(invalid_arg(RESCHEDULE_REFUSED))
                else:
                    job.finish()
                continue
            job.state = QUEUED
            job.execution = None
            job.taken = -job.queue.qsize() if job.queue is not None else 0  # (what it has not read yet is not new)
            job.enqueued_ns = time.perf_counter_ns()
            if slot.gone:
                job.fail(unavailable(f"sequence {correlation_id} of model '{self.model_name}' ended: its model "
                                     f"instance '{getattr(slot.instance, 'label', slot.instance)}' went away"))
                continue
            self._last_ns[correlation_id] = self._clock()
            slot.queue.append(_Entry(job, correlation_id, False, False))

    def _end_sequence(self, correlation_id: int | str, slot: _Slot) -> None:
        """A sequence ends early (an iterative sequence's request ended without being given back, or a request of it
        was cancelled), as Triton ends it with a cancelled END request queued behind what its slot holds."""
        if self._sequences.get(correlation_id) is not slot:
            return  # (ended already: an END request, idle release, a new START)
        del self._sequences[correlation_id]
        self._last_ns.pop(correlation_id, None)
        self._states.pop(correlation_id, None)
        if slot.gone:
            return
        if slot.queue:
            end = Job(None, 1, None, wanted=False)
            end.finish()
            slot.queue.append(_Entry(end, correlation_id, False, True))  # (`_head` gives the slot back when reached)
        else:
            self._give_back(slot)

    def _execution_ended(self, execution: _Execution) -> None:
        self._end_execution(execution)
        super()._execution_ended(execution)
        self._schedule()

