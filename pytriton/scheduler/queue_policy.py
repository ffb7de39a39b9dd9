"""A model's queue policy, as Triton's dynamic batcher applies it: priority levels, a bound on waiting requests,
and how long a request may wait.

Requests of each priority level wait in their own FIFO; the scheduler always takes from the most urgent level
that has one (level 1 first; a request's priority 0, or one past the model's `priority_levels`, means the model's
default level). A level's policy (its own entry of `priority_queue_policy`, else `default_queue_policy`) bounds how
many of its requests may wait (`max_queue_size`: a request past it is refused at once, UNAVAILABLE "Exceeds
maximum queue size") and how long one may wait (`default_timeout_microseconds`, which a request's own `timeout`
may shorten when `allow_timeout_override` is set). A request that waited past its timeout is rejected (REJECT:
UNAVAILABLE "Request timeout expired", at its deadline) or goes behind the level's requests that did not (DELAY).

`PolicyQueue` stands in for the scheduler's FIFO deque (the same operations on the same jobs: withdrawn jobs stay
in it until they reach the front), so the scheduler's accounting is the same with a policy and without.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from collections.abc import Iterator, Mapping
from typing import Any, Callable

from pytriton.exceptions import ServerError, unavailable
from pytriton.scheduler.job import QUEUED, Job

TIMEOUT_EXPIRED = "Request timeout expired"
QUEUE_FULL = "Exceeds maximum queue size"


@dataclasses.dataclass(frozen=True)
class LevelPolicy:
    """One priority level's queue policy (Triton's ModelQueuePolicy)."""

    max_queue_size: int = 0  # 0: unbounded
    timeout_us: int = 0  # 0: no timeout
    allow_override: bool = False  # a request may ask for a shorter timeout
    delay: bool = False  # DELAY (else REJECT) a request past its timeout

    def timeout_of(self, requested_us: int) -> int:
        """The timeout a request that asked for `requested_us` (0: nothing) gets, in microseconds (0: none). As in
        Triton, a request may only shorten a timeout the policy sets."""
        if self.allow_override and 0 < requested_us < self.timeout_us:
            return requested_us
        return self.timeout_us


@dataclasses.dataclass(frozen=True)
class QueueRules:
    """A model's queue policy: its priority levels and each level's policy."""

    priority_levels: int = 0
    default_level: int = 0
    default: LevelPolicy = LevelPolicy()
    levels: Mapping[int, LevelPolicy] = dataclasses.field(default_factory=dict)

    def level_of(self, priority: int) -> int:
        """The level a request of `priority` waits at (Triton: 0 or past priority_levels is the default level)."""
        if priority <= 0 or priority > self.priority_levels:
            return self.default_level
        return priority

    def policy(self, level: int) -> LevelPolicy:
        return self.levels.get(level, self.default)

    @property
    def plain(self) -> bool:
        """Nothing to apply: one FIFO without bound or timeout (the scheduler keeps its plain deque)."""
        return self.priority_levels == 0 and self.default == LevelPolicy() and not self.levels


def level_policy(policy: Any) -> LevelPolicy:
    """A LevelPolicy from a QueuePolicy of the model configuration (None: the default policy)."""
    if policy is None:
        return LevelPolicy()
    action = getattr(policy.timeout_action, "value", policy.timeout_action)
    return LevelPolicy(int(policy.max_queue_size), int(policy.default_timeout_microseconds),
                       bool(policy.allow_timeout_override), str(action) == "DELAY")


def queue_rules(batcher: Any) -> QueueRules | None:
    """The queue policy of a model's DynamicBatcher (None: a plain FIFO). Triton applies a queue policy only with
    its dynamic batcher, so a model without one gets none."""
    if batcher is None:
        return None
    levels = int(batcher.priority_levels or 0)
    default_level = int(batcher.default_priority_level or 0)
    per_level = {int(k): level_policy(v) for k, v in (batcher.priority_queue_policy or {}).items()}
    if levels == 0:  # one queue: Triton ignores per-level policies then
        per_level = {}
    rules = QueueRules(levels, default_level, level_policy(batcher.default_queue_policy), per_level)
    return None if rules.plain else rules


def request_queueing(parameters: Mapping[str, Any]) -> tuple[int, int]:
    """A request's priority and the queue timeout it asks for (microseconds), from its `priority` and `timeout`
    parameters (0: none given)."""
    if not parameters:
        return 0, 0
    priority, timeout = parameters.get("priority", 0), parameters.get("timeout", 0)
    return (priority if type(priority) is int and priority > 0 else 0,
            timeout if type(timeout) is int and timeout > 0 else 0)


class _Level:
    __slots__ = ("policy", "waiting", "delayed")

    def __init__(self, policy: LevelPolicy):
        self.policy = policy
        self.waiting: collections.deque[Job] = collections.deque()
        self.delayed: collections.deque[Job] = collections.deque()  # (DELAY) past their timeout: after the others

    def live(self) -> int:
        return sum(1 for job in self.waiting if job.state == QUEUED) + sum(1 for job in self.delayed
                                                                           if job.state == QUEUED)


class PolicyQueue:
    """The scheduler's queue under a queue policy. `reject(job, error)` is the scheduler's: it ends a queued job that
    waited past its timeout (the job stays in the queue, ended, as a withdrawn one does, until it reaches the
    front)."""

    def __init__(self, rules: QueueRules, reject: Callable[[Job, ServerError], None],
                 clock: Callable[[], int] = time.perf_counter_ns, reordered: Callable[[], None] | None = None):
        self.rules = rules
        self._reject = reject
        self._reordered = reordered  # told when a DELAY job moved behind its level's others (a batch may form now)
        self._clock = clock
        self._levels: dict[int, _Level] = {}
        self._order: list[int] = []  # the levels that exist, most urgent first
        self._deadline: dict[Job, int] = {}  # queued jobs with a timeout -> when it expires (clock ns)
        self._timers: dict[Job, Any] = {}  # queued jobs with a timeout -> their timer (a handle with `cancel()`)
        self.call_later: Callable[..., Any] = asyncio.get_running_loop().call_later  # (a test's fake clock: its own)
        self._size = 0  # entries, withdrawn ones included (as the deque's len)

    # ---- the deque's operations ----------------------------------------------------------------
    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __iter__(self) -> Iterator[Job]:
        for level in self._order:
            yield from self._levels[level].waiting
            yield from self._levels[level].delayed

    def __getitem__(self, index: int) -> Job:
        if index != 0:
            raise IndexError("only the front of a policy queue can be read")
        return self._front()[0]

    def append(self, job: Job) -> None:
        """Queue a new job at its priority level; UNAVAILABLE if the level holds max_queue_size already."""
        level_no = self.rules.level_of(job.priority)
        level = self._level(level_no)
        policy = level.policy
        if policy.max_queue_size and level.live() >= policy.max_queue_size:
            raise unavailable(f"[request id: {job.request_id or '<id_unknown>'}] {QUEUE_FULL}")  # (Triton's words)
        level.waiting.append(job)
        self._size += 1
        timeout_us = policy.timeout_of(job.timeout_us)
        if timeout_us:
            deadline = self._clock() + timeout_us * 1000
            self._deadline[job] = deadline
            # at its deadline: a REJECT job's caller hears at once, not when an instance frees; a DELAY job moves
            # behind its level's others then, as in Triton, so that those may batch without it
            self._timers[job] = self.call_later(timeout_us / 1e6, self._timed_out, job)

    def appendleft(self, job: Job) -> None:
        """Put a job back at the front of its level (it was taken, and never started)."""
        self._level(self.rules.level_of(job.priority)).waiting.appendleft(job)
        self._size += 1

    def popleft(self) -> Job:
        job, level, delayed = self._front(apply=False)  # what the scheduler just read at [0]
        (level.delayed if delayed else level.waiting).popleft()
        self._size -= 1
        self._forget(job)
        return job

    def compacted(self) -> PolicyQueue:
        """Drop the withdrawn jobs (what the scheduler does to its deque when many were withdrawn)."""
        for level in self._levels.values():
            level.waiting = collections.deque(j for j in level.waiting if j.state == QUEUED)
            level.delayed = collections.deque(j for j in level.delayed if j.state == QUEUED)
        self._size = sum(len(level.waiting) + len(level.delayed) for level in self._levels.values())
        return self

    # ---- timeouts ------------------------------------------------------------------------------
    def _timed_out(self, job: Job) -> None:
        self._timers.pop(job, None)
        if job.state != QUEUED or job not in self._deadline:
            return
        level = self._level(self.rules.level_of(job.priority))
        if not level.policy.delay:
            self._expire(job)
            return
        try:
            level.waiting.remove(job)
        except ValueError:  # (not waiting: taken already)
            return
        self._forget(job)
        level.delayed.append(job)
        if self._reordered is not None:
            self._reordered()

    def reject_expired(self) -> None:
        """Apply the timeouts whose deadline has passed (what their timers do, one by one): REJECT jobs end, DELAY
        jobs move behind their level's others."""
        now = self._clock()
        for job, deadline in list(self._deadline.items()):
            if deadline <= now and job in self._timers:
                self._timers[job].cancel()
                self._timed_out(job)

    def _expire(self, job: Job) -> None:
        self._forget(job)
        self._reject(job, unavailable(TIMEOUT_EXPIRED))

    def _forget(self, job: Job) -> None:
        self._deadline.pop(job, None)
        timer = self._timers.pop(job, None)
        if timer is not None:
            timer.cancel()

    # ---- internals -----------------------------------------------------------------------------
    def _level(self, number: int) -> _Level:
        level = self._levels.get(number)
        if level is None:
            level = self._levels[number] = _Level(self.rules.policy(number))
            self._order = sorted(self._levels)
        return level

    def _front(self, apply: bool = True) -> tuple[Job, _Level, bool]:
        """The job the scheduler takes next: the first of the most urgent level that has one, those past their
        timeout applied on the way (REJECT: ended, left at the front for the scheduler to skip; DELAY: moved behind
        the level's others)."""
        now = self._clock()
        for number in self._order:
            level = self._levels[number]
            waiting = level.waiting
            while waiting:
                job = waiting[0]
                deadline = self._deadline.get(job)
                if not apply or job.state != QUEUED or deadline is None or deadline > now:
                    return job, level, False
                if level.policy.delay:
                    self._forget(job)
                    level.delayed.append(waiting.popleft())
                else:
                    self._expire(job)  # ended: the scheduler pops it as a withdrawn one
            if level.delayed:
                return level.delayed[0], level, True
        raise IndexError("the queue is empty")


def compacted(queue: Any) -> Any:
    """`queue` without its withdrawn jobs (a deque or a PolicyQueue)."""
    if isinstance(queue, PolicyQueue):
        return queue.compacted()
    return collections.deque(j for j in queue if j.state == QUEUED)


__all__ = ["LevelPolicy", "QueueRules", "PolicyQueue", "queue_rules", "request_queueing",
           "compacted", "TIMEOUT_EXPIRED", "QUEUE_FULL"]
