"""Whatever an inference callable returns (a value, an awaitable, a generator, an async generator), handled
once for every decorator: mapped, or driven through several calls."""

from __future__ import annotations

import inspect
import typing
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from typing import Any

from pytriton.decorators._requests import PyTritonRuntimeError


def map_result(result: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to a result, each item of a (async) generator, or the value of an awaitable."""
    if type(result) in (dict, list, tuple):  # the common case, without the (slow) awaitable checks
        return fn(result)
    if inspect.isgenerator(result):
        return _map_generator(result, fn)
    if inspect.isasyncgen(result):
        return _map_async_generator(result, fn)
    if inspect.isawaitable(result):
        return _map_awaitable(result, fn)
    return fn(result)


def _map_generator(gen: Generator[Any, Any, Any], fn: Callable[[Any], Any]) -> Generator[Any, None, None]:
    try:
        for item in gen:
            yield fn(item)
    finally:
        gen.close()


async def _map_async_generator(agen: AsyncGenerator[Any, Any], fn: Callable[[Any], Any]) -> AsyncGenerator[Any, None]:
    try:
        async for item in agen:
            yield fn(item)
    finally:
        await agen.aclose()


async def _map_awaitable(awaitable: Awaitable[Any], fn: Callable[[Any], Any]) -> Any:
    result = await awaitable
    if inspect.isasyncgen(result) or inspect.isgenerator(result):  # pragma: no cover - unusual callables
        raise PyTritonRuntimeError("An awaitable inference callable must not resolve to a generator")
    return fn(result)


def drive(steps: typing.Generator[Any, Any, Any]) -> Any:
    """Run ``steps``, a generator yielding raw results of calls to a wrapped callable and receiving their values.

    Runs synchronously while the results are plain values; as soon as one is awaitable, the rest runs in a
    coroutine, which is returned (so a decorator around an ``async def`` callable returns a coroutine).
    """
    try:
        value = next(steps)
        while not inspect.isawaitable(value):
            value = steps.send(value)
    except StopIteration as stop:
        return stop.value
    return _drive_async(steps, value)


async def _drive_async(steps: typing.Generator[Any, Any, Any], awaitable: Awaitable[Any]) -> Any:
    value = await awaitable
    while True:
        try:
            value = steps.send(value)
        except StopIteration as stop:
            return stop.value
        if inspect.isawaitable(value):
            value = await value


async def async_value(value: Any) -> Any:
    return value


def is_generator(result: Any) -> bool:
    return inspect.isgenerator(result) or inspect.isasyncgen(result)


def generator_of_groups_error(decorator_name: str) -> PyTritonRuntimeError:
    return PyTritonRuntimeError(
        f"The {decorator_name} decorator supports inference callables returning generators only when "
        "there is a single group to process"
    )
