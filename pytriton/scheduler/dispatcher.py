"""Hands executions to idle instances of a model; with a dynamic batcher, merges queued requests into batches.

Without batching, the caller's coroutine waits for an instance, executes and hands the instance to the
next waiter (no task per request). With batching (max_batch_size > 0 and a DynamicBatcher), requests
wait in a FIFO queue; whenever an instance is idle, the queued requests are taken up to max_batch_size
(in batch elements) and executed together as one `List[Request]`; a batch smaller than the largest
preferred size waits up to max_queue_delay_microseconds for more. The most recently released instance
is reused first (its caches are warm).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import time
from typing import AsyncIterator

from pytriton.exceptions import unavailable
from pytriton.model_config.common import DynamicBatcher
from pytriton.proxy.messages import ExecutionResult, RequestData
from pytriton.proxy.router import ProxyRouter, WorkerLink


@dataclasses.dataclass
class _Queued:
    request: RequestData
    batch_size: int
    future: asyncio.Future
    enqueued_ns: int

    @property
    def signature(self) -> tuple:
        """Requests batch together only when their inputs match apart from the batch dimension."""
        return tuple((t.name, t.datatype, tuple(t.shape[1:])) for t in self.request.inputs)


class _SharedRelease:
    """Frees a batch's response buffers once every request of the batch released its share."""

    def __init__(self, result: ExecutionResult, users: int):
        self.result = result
        self.users = users

    def __call__(self) -> None:
        self.users -= 1
        if self.users == 0:
            self.result.release_buffers()


PIPELINE_DEPTH = int(os.environ.get("PYTRITON_PIPELINE_DEPTH", "2"))


class InstanceDispatcher:
    """Queue and instance pool of one model.

    Without batching, an instance may have up to PIPELINE_DEPTH executions handed to it: the worker still
    runs them one at a time, but the next one already waits in its socket when it finishes, so the
    server's turnaround does not leave the worker idle. A fully idle instance is always preferred.
    """

    def __init__(
        self,
        model_name: str,
        router: ProxyRouter,
        max_batch_size: int = 0,
        batcher: DynamicBatcher | None = None,
    ):
        self.model_name = model_name
        self.router = router
        self._idle: list[WorkerLink] = []  # instances with nothing in flight
        self._partial: list[WorkerLink] = []  # instances that can take one more (pipelining)
        self._inflight: dict[WorkerLink, int] = {}
        self._instances: set[WorkerLink] = set()
        self._waiters: collections.deque[asyncio.Future[WorkerLink]] = collections.deque()
        self._unavailable_reason: str | None = None
        self.batching = batcher is not None and max_batch_size > 0
        self.max_batch_size = max_batch_size
        self._delay_ns = (batcher.max_queue_delay_microseconds * 1000) if batcher else 0
        preferred = [p for p in (batcher.preferred_batch_size or []) if 0 < p <= max_batch_size] if batcher else []
        self._preferred = set(preferred)
        self._target = max(preferred) if preferred else max_batch_size
        self._queue: collections.deque[_Queued] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._depth = 1 if self.batching else PIPELINE_DEPTH

    @property
    def instance_count(self) -> int:
        return len(self._instances)

    @property
    def queue_size(self) -> int:
        return len(self._waiters) + len(self._queue)

    # ---- instances ---------------------------------------------------------------------------
    def add_instance(self, link: WorkerLink) -> None:
        self._unavailable_reason = None
        self._instances.add(link)
        self._inflight[link] = 1
        self._release(link)

    def remove_instance(self, link: WorkerLink) -> None:
        self._instances.discard(link)
        self._inflight.pop(link, None)
        for pool in (self._idle, self._partial):
            if link in pool:
                pool.remove(link)

    def fail_waiters(self, reason: str) -> None:
        """No instance can come back (e.g. the callable no longer loads): fail who waits, and later callers."""
        self._unavailable_reason = reason
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(unavailable(reason))
        while self._queue:
            queued = self._queue.popleft()
            if not queued.future.done():
                queued.future.set_exception(unavailable(reason))

    def _release(self, link: WorkerLink) -> None:
        """One execution on `link` finished: hand the capacity to a waiter or back to the pools."""
        if link.closed or link not in self._instances:
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(link)  # the in-flight count stays: the waiter takes this slot
                return
        count = self._inflight[link] = self._inflight[link] - 1
        if count == 0:
            if link in self._partial:
                self._partial.remove(link)
            self._idle.append(link)
        elif count < self._depth and link not in self._partial:
            self._partial.append(link)
        if self._queue:
            self._schedule()

    def _take(self) -> WorkerLink | None:
        """An instance with spare capacity (idle ones first), with its in-flight count raised."""
        if self._idle:
            link = self._idle.pop()
        elif self._partial:
            link = self._partial.pop()
        else:
            return None
        count = self._inflight[link] = self._inflight[link] + 1
        if 0 < count < self._depth:
            self._partial.append(link)
        return link

    async def _acquire(self) -> WorkerLink:
        if not self._waiters:
            link = self._take()
            if link is not None:
                return link
        if self._unavailable_reason is not None and not self._instances:
            raise unavailable(self._unavailable_reason)
        waiter: asyncio.Future[WorkerLink] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release(waiter.result())
            raise

    # ---- one request per execution -----------------------------------------------------------
    async def execute(self, requests: list[RequestData], batch_size: int = 1) -> tuple[ExecutionResult, int, WorkerLink]:
        """Run one request (or a given batch); return its result, the ns it waited in the queue and the instance.

        With dynamic batching the request may run together with others; the result then holds its own
        response only and `execution_batch_size` tells how large the executed batch was.
        """
        if self.batching and len(requests) == 1:
            return await self._execute_batched(requests[0], batch_size)
        queued = time.perf_counter_ns()
        link = await self._acquire()
        queue_ns = time.perf_counter_ns() - queued
        try:
            call_id, future = self.router.submit_call(link, requests)
        except BaseException:
            self._release(link)
            raise
        try:
            reply = await future  # no shield: one event-loop turn less per request
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # the answer came in the same turn as the cancel
                if future.exception() is None:
                    self.router.discard(link, future.result()[0])
                self._release(link)
            else:
                # The caller gave up, but the worker is still busy with it: the instance is free once it answers.
                self.router.abandon(link, call_id, lambda _reply: self._release(link))
            raise
        except BaseException:
            self._release(link)
            raise
        self._release(link)
        return self.router.decode(link, *reply), queue_ns, link

    async def execute_stream(
        self, requests: list[RequestData]
    ) -> AsyncIterator[tuple[ExecutionResult, int, WorkerLink]]:
        """Run one batch on a decoupled model; yields each result; the instance stays busy until the end."""
        queued = time.perf_counter_ns()
        link = await self._acquire()
        queue_ns = time.perf_counter_ns() - queued
        try:
            async for result in self.router.execute_stream(link, requests):
                yield result, queue_ns, link
        finally:
            self._release(link)

    # ---- dynamic batching --------------------------------------------------------------------
    async def _execute_batched(self, request: RequestData, batch_size: int) -> tuple[ExecutionResult, int, WorkerLink]:
        if self._unavailable_reason is not None and not self._instances:
            raise unavailable(self._unavailable_reason)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._queue.append(_Queued(request, max(batch_size, 1), future, time.perf_counter_ns()))
        self._schedule()
        return await future

    def _schedule(self) -> None:
        """Start batches while instances are idle and requests are queued (respecting the queue delay)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while (self._idle or self._partial) and self._queue:
            while self._queue and self._queue[0].future.done():  # cancelled by its caller
                self._queue.popleft()
            if not self._queue:
                return
            if self._delay_ns:
                queued = sum(q.batch_size for q in self._queue)
                if queued < self._target and queued not in self._preferred:
                    wait_ns = self._queue[0].enqueued_ns + self._delay_ns - time.perf_counter_ns()
                    if wait_ns > 0:
                        self._timer = asyncio.get_running_loop().call_later(wait_ns / 1e9, self._schedule)
                        return
            batch = self._take_batch()
            link = self._take()
            assert link is not None
            asyncio.ensure_future(self._run_batch(link, batch))

    def _take_batch(self) -> list[_Queued]:
        batch: list[_Queued] = []
        total = 0
        signature = None
        while self._queue:
            queued = self._queue[0]
            if queued.future.done():
                self._queue.popleft()
                continue
            if batch and (total + queued.batch_size > self.max_batch_size or queued.signature != signature):
                break
            signature = queued.signature
            batch.append(self._queue.popleft())
            total += queued.batch_size
        return batch

    async def _run_batch(self, link: WorkerLink, batch: list[_Queued]) -> None:
        started = time.perf_counter_ns()
        try:
            result = await self.router.execute(link, [q.request for q in batch])
        except Exception as exc:  # noqa: BLE001 - every request of the batch gets the error
            for queued in batch:
                if not queued.future.done():
                    queued.future.set_exception(exc)
            return
        finally:
            self._release(link)
        total = sum(q.batch_size for q in batch)
        if result.error or len(result.responses) != len(batch):
            for queued in batch:
                if not queued.future.done():
                    queued.future.set_result((result, started - queued.enqueued_ns, link))
            return
        share = _SharedRelease(result, len(batch))
        for index, queued in enumerate(batch):
            part = ExecutionResult(
                responses=[result.responses[index]],
                compute_input_ns=result.compute_input_ns,
                compute_infer_ns=result.compute_infer_ns,
                compute_output_ns=result.compute_output_ns,
                release=share,
                execution_batch_size=total,
                first_of_execution=index == 0,
            )
            if queued.future.done():  # the caller went away: its share is released now
                share()
            else:
                queued.future.set_result((part, started - queued.enqueued_ns, link))
