"""Conversations with the server written once, run blocking or on asyncio.

The readiness checks and the model clients describe their server calls as generators ("steps") that yield
`ServerCall`s and `Pause`s and are sent each call's result, or have its exception thrown in where the call
was made. `run_blocking` makes the calls on a `tritonclient.http` / `tritonclient.grpc` client and sleeps;
`run_asyncio` awaits them on a `.aio` client, each bounded by its `timeout_s`. So which calls are made, in
what order, and what their errors mean lives in one place for both kinds of client.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from collections.abc import Callable, Generator
from typing import Any, TypeVar, cast

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ServerCall:
    """Call `method(*args, **kwargs)` of a tritonclient client; `timeout_s` bounds an awaited call."""

    method: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    timeout_s: float | None = None


@dataclasses.dataclass(frozen=True)
class Pause:
    """Wait `seconds` before the next step (between readiness polls)."""

    seconds: float


Steps = Generator[ServerCall | Pause, Any, T]


def run_blocking(steps: Steps[T]) -> T:
    """Run `steps` in this thread with blocking calls; return what the generator returns."""
    try:
        step = next(steps)
        while True:
            try:
                if isinstance(step, Pause):
                    time.sleep(step.seconds)
                    value = None
                else:
                    value = step.method(*step.args, **step.kwargs)
            except BaseException as exc:  # noqa: BLE001 - the steps decide, as a straight-line caller would
                step = steps.throw(exc)
            else:
                step = steps.send(value)
    except StopIteration as stop:
        return cast(T, stop.value)


async def run_asyncio(steps: Steps[T]) -> T:
    """Run `steps` on the running event loop, awaiting each call (within its `timeout_s`)."""
    try:
        step = next(steps)
        while True:
            try:
                if isinstance(step, Pause):
                    await asyncio.sleep(step.seconds)
                    value = None
                else:
                    value = step.method(*step.args, **step.kwargs)
                    if inspect.isawaitable(value):
                        value = await (value if step.timeout_s is None else asyncio.wait_for(value, step.timeout_s))
            except BaseException as exc:  # noqa: BLE001 - cancellation too: the steps' handlers let it through
                step = steps.throw(exc)
            else:
                step = steps.send(value)
    except StopIteration as stop:
        return cast(T, stop.value)
