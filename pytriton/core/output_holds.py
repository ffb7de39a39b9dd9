"""Bytes of client regions that a call's worker may still write into, and the calls that wait for them.

A call that names output regions holds their bytes from its submission until no worker can write them any more: its
execution answered or failed, or, when it was failed while its worker ran on (an execution timeout), that worker
answered or is gone (`Job.on_settled`). A call whose caller left (deadline, cancel, closed connection) keeps its hold
while its execution runs: the worker may be past its last look for a CANCEL and write its outputs late. A call that
reads or writes bytes overlapping such an orphaned hold is held back (`HELD`, before the scheduler sees it) until the
hold ends, so the late write lands before the new call starts and a client never reads a withdrawn call's answer in
place of its own. Holds of calls whose callers still wait do not hold anything back: two calls in flight at once on the
same bytes (perf_analyzer sends its concurrent requests into one output region) run side by side, as in Triton.

Per server process: the front-end processes of a group (`--frontend-processes`) each fence their own calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from pytriton.core.shm_registry import CudaShmRegion
from pytriton.core.types import RegionSlice
from pytriton.scheduler.job import DONE, Job

logger = logging.getLogger("pytriton.core")

# The memory a region slice lies in (a system region's shm key, a CUDA region's IPC handle and device), its first byte
# and the byte after its last, in that memory
Span = tuple[object, int, int]


def span(where: RegionSlice) -> Span:
    """Where `where`'s bytes lie, whatever the region's name (two regions may name the same object)."""
    region = where.region
    if isinstance(region, CudaShmRegion):
        return (region.raw_handle, region.device_id), where.offset, where.offset + where.byte_size
    start = region.offset + where.offset
    return region.key.lstrip("/"), start, start + where.byte_size


class Hold:
    """One call's hold on the output bytes it names; for a call held back, what it waits for."""

    __slots__ = ("job", "spans", "waiters", "blockers", "reads", "resume")

    def __init__(self, job: Job, spans: list[Span]):
        self.job = job
        self.spans = spans  # the output bytes it holds
        self.waiters: dict[Hold, None] | None = None  # calls held back until this hold ends
        # (a call held back) the holds it waits for, the bytes it reads or writes, and what hands it on
        self.blockers: list[Hold] = []
        self.reads: list[Span] = []
        self.resume: Callable[[], None] | None = None

    @property
    def orphaned(self) -> bool:
        """Its caller no longer waits for it (withdrawn, or failed while its worker runs on), and its worker may still
        write."""
        job = self.job
        return job.abandoned or job.state == DONE


class OutputHolds:
    """The output holds of the calls in flight, by the memory they lie in."""

    def __init__(self) -> None:
        self._by_memory: dict[object, dict[Hold, None]] = {}

    def __len__(self) -> int:
        """Memories (shm objects, CUDA allocations) with a hold on them."""
        return len(self._by_memory)

    def admit(self, job: Job, outputs: Iterable[RegionSlice], inputs: Iterable[RegionSlice],
              resume: Callable[[], None]) -> tuple[Hold | None, bool]:
        """Hold `job`'s output bytes; whether it must wait before it runs: while an orphaned hold overlaps what it reads
        or writes, then `resume` is called once none does (never, if the job ends first). With the job's `Hold`, to
        `release` once the job has settled (None when it holds nothing and waits for nothing)."""
        spans = [span(where) for where in outputs]
        blockers = self._blockers(spans, inputs, None) if self._by_memory else []
        hold: Hold | None = None
        if spans:
            hold = Hold(job, spans)
            for memory, _, _ in spans:
                holds = self._by_memory.get(memory)
                if holds is None:
                    self._by_memory[memory] = {hold: None}
                else:
                    holds[hold] = None
        if not blockers:
            return hold, False
        if hold is None:
            hold = Hold(job, [])
        hold.reads = spans + [span(where) for where in inputs]
        hold.resume = resume
        self._wait(hold, blockers)
        return hold, True

    def release(self, hold: Hold) -> None:
        """`hold`'s job has settled: its bytes are free, and calls held back for them only go on (in the order they
        came) once nothing else orphaned overlaps them."""
        for memory, _, _ in hold.spans:
            holds = self._by_memory.get(memory)
            if holds is not None:
                holds.pop(hold, None)
                if not holds:
                    del self._by_memory[memory]
        for blocker in hold.blockers:  # (it ended while held back: withdrawn)
            if blocker.waiters is not None:
                blocker.waiters.pop(hold, None)
        hold.blockers = []
        hold.resume = None
        waiters, hold.waiters = hold.waiters, None
        for waiter in waiters or ():
            waiter.blockers.remove(hold)
            if not waiter.blockers and waiter.resume is not None:
                self._recheck(waiter)

    def _recheck(self, waiter: Hold) -> None:
        blockers = self._blockers(waiter.reads, (), waiter)
        if blockers:  # (a call on these bytes was withdrawn meanwhile)
            self._wait(waiter, blockers)
            return
        resume, waiter.resume = waiter.resume, None
        waiter.reads = []
        if resume is not None:
            resume()

    def _wait(self, waiter: Hold, blockers: list[Hold]) -> None:
        logger.debug("request '%s' waits: bytes it reads or writes in a client region may still be written by "
                     "%d withdrawn request(s)", waiter.job.request_id, len(blockers))
        waiter.blockers = blockers
        for blocker in blockers:
            if blocker.waiters is None:
                blocker.waiters = {waiter: None}
            else:
                blocker.waiters[waiter] = None

    def _blockers(self, spans: list[Span], inputs: Iterable[RegionSlice], waiter: Hold | None) -> list[Hold]:
        """The orphaned holds that overlap `spans` or the `inputs`' bytes (but `waiter`'s own)."""
        found: list[Hold] = []
        by_memory = self._by_memory
        for memory, start, end in [*spans, *(span(where) for where in inputs)]:
            holds = by_memory.get(memory)
            if not holds:
                continue
            for hold in holds:
                if hold is waiter or hold in found or not hold.orphaned:
                    continue
                for other, other_start, other_end in hold.spans:
                    if other == memory and other_start < end and start < other_end:
                        found.append(hold)
                        break
        return found
