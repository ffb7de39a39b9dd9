"""Fake instances and results for driving the scheduler without workers, sockets or messages."""

from __future__ import annotations

import asyncio
from typing import Any

from pytriton.exceptions import ServerError, unavailable
from pytriton.scheduler.dispatcher import ModelScheduler
from pytriton.scheduler.job import NO_RESULT, ExecutionStats, Job


class FakeResult:
    """A result whose release is counted (it stands for a worker's response slots)."""

    released_twice: list[FakeResult] = []

    def __init__(self, value: Any):
        self.value = value
        self.releases = 0

    def release(self) -> None:
        self.releases += 1
        if self.releases > 1:
            FakeResult.released_twice.append(self)


class FakeExecution:
    """One execution on a FakeInstance, and its control: `cancel()` is noted, and the credit of a stream
    (`consumed(count)`) is checked to only grow and never pass what was delivered."""

    def __init__(self, instance: FakeInstance, payloads: list[Any], sink: Any, window: int = 0):
        self.instance = instance
        self.payloads = payloads
        self.sink = sink
        self.cancelled = False
        self.finished = False
        self.results: list[FakeResult] = []
        self.window = window
        self.sent = 0  # non-final replies
        self.credit = 0  # the consumed count last reported
        self.closed: set[int] = set()  # requests that have had their last result (a stream answering each alone)

    def cancel(self) -> None:
        self.cancelled = True

    def consumed(self, count: int) -> None:
        assert self.credit <= count <= self.sent, (self.credit, count, self.sent)
        self.credit = count

    @property
    def blocked(self) -> bool:
        """A stream with a window that has run as far ahead of its readers as it may."""
        return bool(self.window) and self.sent - self.credit >= self.window

    def reply(self, final: bool = True, error_index: int | None = None, answered: set[int] | None = None,
              finished: set[int] | None = None) -> list[FakeResult]:
        """The instance answers: one result per payload (or an error for one of them). A stream of several requests
        answers each on its own: only those in `answered` (all when None) get one, NO_RESULT the others and those
        already finished; this message is the last of the requests in `finished`."""
        results: list[Any] = []
        for index, payload in enumerate(self.payloads):
            if index in self.closed or (answered is not None and index not in answered):
                results.append(NO_RESULT)
            elif index == error_index:
                results.append(ServerError(3, f"request {payload} failed"))
            else:
                result = FakeResult(payload)
                self.results.append(result)
                results.append(result)
        finals = None
        if finished:
            finals = [index in finished for index in range(len(self.payloads))]
            self.closed.update(finished)
        if final:
            self.finished = True
        else:
            self.sent += 1
        self.sink.deliver(results, ExecutionStats(0, 1, 2, 3), final, finals)
        return [r for r in results if isinstance(r, FakeResult)]

    def fail(self, reason: str = "worker died") -> None:
        self.finished = True
        self.sink.fail(unavailable(reason))


class FakeInstance:
    """An instance whose executions the test completes by hand."""

    def __init__(self, label: str, window: int = 0):
        self.label = label
        self.window = window
        self.executions: list[FakeExecution] = []
        self.dead = False
        self.killed: str | None = None

    def execute(self, payloads: list[Any], sink: Any) -> FakeExecution:
        if self.dead:
            raise unavailable(f"model instance '{self.label}' is not running")
        execution = FakeExecution(self, list(payloads), sink, self.window)
        self.executions.append(execution)
        return execution

    def kill(self, reason: str) -> None:
        self.killed = reason

    @property
    def running(self) -> list[FakeExecution]:
        return [e for e in self.executions if not e.finished]

    def die(self, scheduler: ModelScheduler) -> None:
        """The worker process is gone: the source removes the instance, its executions fail."""
        self.dead = True
        scheduler.remove_instance(self)
        for execution in self.running:
            execution.fail(f"model instance '{self.label}' died")


def make_job(payload: Any, batch_size: int = 1, signature: Any = None, stream: bool = False) -> tuple[Job, list[int]]:
    """A job and a list that counts how often its cleanups ran."""
    job = Job(payload, batch_size, signature, stream)
    ended: list[int] = []
    job.on_finish(lambda: ended.append(1))
    return job, ended


async def turns(n: int = 3) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


# ---- the sequence batcher's requests -------------------------------------------------------------------------

class FakeRequests:
    """Payloads are (correlation id, flags, value); a prepared one is ('req', id, start, end, value)."""

    def fields(self, payload):
        correlation_id, flags, _ = payload
        return correlation_id, "S" in flags, "E" in flags

    def prepare(self, payload, correlation_id, start, end):
        return ("req", correlation_id, start, end, payload[2])

    def null(self, payload):
        return ("null",)


class Clock:
    """A clock the test moves by hand (`ns`)."""

    def __init__(self):
        self.ns = 0

    def __call__(self):
        return self.ns


def submit(scheduler, correlation_id, flags="", value=0):
    """A job of the sequence `correlation_id` (FakeRequests payload), submitted."""
    job, _ = make_job((correlation_id, flags, value))
    scheduler.submit(job)
    return job


def run(coroutine):
    return asyncio.run(coroutine)
