"""Hands each execution to an idle instance of the model; requests wait in FIFO order when all are busy.

No task per request: the caller's coroutine waits for an instance, executes and hands the instance to
the next waiter. The most recently released instance is reused first (its caches are warm).
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import AsyncIterator

from pytriton.exceptions import unavailable
from pytriton.proxy.messages import ExecutionResult, RequestData
from pytriton.proxy.router import ProxyRouter, WorkerLink


class InstanceDispatcher:
    """Queue and instance pool of one model."""

    def __init__(self, model_name: str, router: ProxyRouter):
        self.model_name = model_name
        self.router = router
        self._idle: list[WorkerLink] = []
        self._instances: set[WorkerLink] = set()
        self._waiters: collections.deque[asyncio.Future[WorkerLink]] = collections.deque()
        self._unavailable_reason: str | None = None

    @property
    def instance_count(self) -> int:
        return len(self._instances)

    @property
    def queue_size(self) -> int:
        return len(self._waiters)

    def add_instance(self, link: WorkerLink) -> None:
        self._unavailable_reason = None
        self._instances.add(link)
        self._release(link)

    def remove_instance(self, link: WorkerLink) -> None:
        self._instances.discard(link)
        if link in self._idle:
            self._idle.remove(link)

    def fail_waiters(self, reason: str) -> None:
        """No instance can come back (e.g. the callable no longer loads): fail who waits, and later callers."""
        self._unavailable_reason = reason
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(unavailable(reason))

    def _release(self, link: WorkerLink) -> None:
        if link.closed or link not in self._instances:
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(link)
                return
        self._idle.append(link)

    async def _acquire(self) -> WorkerLink:
        if self._idle and not self._waiters:
            return self._idle.pop()
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

    async def execute(self, requests: list[RequestData]) -> tuple[ExecutionResult, int, WorkerLink]:
        """Run one batch on the next free instance; return the result, the ns spent waiting and the instance."""
        queued = time.perf_counter_ns()
        link = await self._acquire()
        queue_ns = time.perf_counter_ns() - queued
        try:
            result = await self.router.execute(link, requests)
        finally:
            self._release(link)
        return result, queue_ns, link

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
