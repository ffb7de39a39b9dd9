"""What the scheduler needs of a model instance, and of whatever provides a model's instances.

Worker pools (processes of our own), instances hosted in a user's process (`Triton.bind`) and, later,
repository models all implement these protocols; the scheduler never sees a worker, a socket or a message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from pytriton.exceptions import ServerError, Status
from pytriton.scheduler.job import ExecutionStats


class InstanceGoneError(ServerError):
    """Raised by `Instance.execute` when the instance can take no work any more (its worker went away before its
    source noticed): the execution never started, and its jobs wait for another instance."""

    def __init__(self, message: str):
        super().__init__(Status.UNAVAILABLE, message)


class ExecutionSink(Protocol):
    """Where an instance reports one execution. Exactly one terminal event per execution: a `deliver` with
    `final=True`, or `fail`. Events after that are ignored (and their results released)."""

    def deliver(self, results: list[Any], stats: ExecutionStats, final: bool = True,
                finals: Sequence[bool] | None = None) -> None:
        """Results of the execution, one per payload in order (a result may be an exception for that request). A
        stream of several requests answers each on its own: NO_RESULT for a request this message brings nothing to,
        and `finals[i]` set on request i's last message (the execution goes on for the others until `final`)."""

    def fail(self, error: BaseException, stats: ExecutionStats | None = None) -> None:
        """The whole execution failed (e.g. the worker died). `stats`: the model ran and raised (the execution
        counts in the model's statistics, as Triton counts it)."""


class ExecutionControl(Protocol):
    """What the scheduler may ask of an execution in progress."""

    def cancel(self) -> None:
        """Nobody wants the results any more: stop a streaming execution early (it still ends with a final result
        or a failure)."""

    # Optional: `cancel_requests(indices)`: the callers of the payloads at `indices` (not all) went away.

    def consumed(self, count: int) -> None:
        """The slowest consumer still reading a streaming execution has taken `count` of its results (a running
        total, never decreasing): the instance may run ahead of that by its own window, and no further."""


class Instance(Protocol):
    """One model instance."""

    label: str

    def execute(self, payloads: list[Any], sink: ExecutionSink) -> ExecutionControl | None:
        """Start executing `payloads` as one batch; return its control (None if it offers none). Raising means the
        execution never started (InstanceGoneError: nor will anything else on this instance)."""

    def kill(self, reason: str) -> None:
        """The instance is stuck: make it go away (its executions fail) and, where possible, come back fresh."""


class InstanceHandler(Protocol):
    """The scheduler side of an instance source: told when instances come and go."""

    def add_instance(self, instance: Any) -> None: ...

    def remove_instance(self, instance: Any) -> None: ...

    def set_unavailable(self, reason: str) -> None: ...


class InstanceSource(Protocol):
    """Provides a model's instances: starts them, reports them to a handler as they come and go, stops them."""

    def bind(self, handler: InstanceHandler) -> None:
        """Report instances to `handler` from now on."""

    async def start(self) -> None:
        """Start the instances; return once the model can serve (raise if it cannot)."""

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Stop every instance (within the timeout, killing what does not stop)."""

    def describe(self) -> list[InstanceStatus]:
        """Each configured instance and whether it is up."""


@dataclasses.dataclass(frozen=True)
class InstanceStatus:
    """How one instance of a model is doing, for metrics and status pages."""

    label: str
    up: bool
    restarts: int = 0
    pid: int | None = None  # a worker process of the server's own (its memory counts as the server's)
    gpu: int | None = None  # the visible GPU id it is pinned to (None: a CPU instance)
    gpu_uuid: str = ""  # that GPU's UUID, where known
    warmup: tuple[tuple[int, int], ...] = ()  # the warm-up executions it ran before it came up: (requests, ns)
