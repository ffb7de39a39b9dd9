"""Responses in the order their requests were dequeued (a dynamic batcher's `preserve_ordering`).

Each job joins the gate when it first starts on an instance; its final result (or error) is held until every job that
started before it has had its own, then handed to its caller. The execution itself is never held: it ends, and its
instance takes more work, as without the gate. A job that can no longer be answered in turn (its caller went away, it
ended without running) stops holding back the jobs behind it.
"""

from __future__ import annotations

import collections
from typing import Any

from pytriton.scheduler.job import DONE, Delivery, Job


class OrderGate:
    """The jobs started and not yet answered, oldest first, and the answers that wait for their turn."""

    __slots__ = ("_order", "_held", "_flushing")

    def __init__(self) -> None:
        self._order: collections.deque[Job] = collections.deque()
        self._held: dict[Job, Delivery | BaseException] = {}
        self._flushing = False

    def __len__(self) -> int:
        return len(self._order)

    def join(self, job: Job) -> None:
        """`job` starts (a job started again after its instance went keeps its first place)."""
        if job.gate is None and job.state != DONE:
            job.gate = self
            self._order.append(job)

    def hold(self, job: Job, answer: Delivery | BaseException) -> None:
        """The final answer of `job`: handed on now if it is its turn, else once the jobs before it have theirs."""
        self._held[job] = answer
        self.flush()

    def drop(self, job: Job) -> None:
        """The caller of `job` went away: a held answer is released now, and the job no longer holds others back."""
        answer = self._held.pop(job, None)
        if job.gate is self:
            job.gate = None
        if answer is not None:
            _hand_on(job, answer)
        self.flush()

    def flush(self) -> None:
        if self._flushing:  # (a caller's cleanup may come back here: the loop below goes on)
            return
        self._flushing = True
        try:
            order, held = self._order, self._held
            while order:
                job = order[0]
                if job.gate is self and job.state != DONE and job.wanted and job not in held:
                    return  # its turn, and no answer yet
                order.popleft()
                answer = held.pop(job, None)
                if job.gate is self:
                    job.gate = None
                if answer is not None:
                    _hand_on(job, answer)
        finally:
            self._flushing = False


def _hand_on(job: Job, answer: Any) -> None:
    if isinstance(answer, Delivery):
        job.deliver(answer)
    else:
        job.fail(answer)
