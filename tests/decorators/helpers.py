"""Helpers of the decorator tests: model configs, binding a callable like PyTriton does, comparisons."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np

from pytriton.decorators import (
    TritonContext,
)
from pytriton.model_config.common import DynamicBatcher
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.types import Request


def _config(
    inputs=(("a", "INT64", (-1,)), ("b", "INT64", (-1,))),
    outputs=(("a", "INT64", (-1,)), ("b", "INT64", (-1,))),
    max_batch_size: int = 16,
    preferred_batch_size: list[int] | None = None,
    optional=(),
) -> TritonModelConfig:
    return TritonModelConfig(
        model_name="model",
        inputs=[TensorSpec(name, dtype, shape, optional=name in optional) for name, dtype, shape in inputs],
        outputs=[TensorSpec(name, dtype, shape) for name, dtype, shape in outputs],
        max_batch_size=max_batch_size,
        batcher=DynamicBatcher(preferred_batch_size=preferred_batch_size) if preferred_batch_size else None,
    )


def _inject(config: TritonModelConfig, fn: Callable) -> TritonContext:
    """Bind like PyTriton's Model.setup does: register the config and set __triton_context__."""
    context = TritonContext()
    context.model_configs[fn] = config
    if hasattr(fn, "__self__"):
        fn.__self__.__triton_context__ = context
    else:
        fn.__triton_context__ = context
    return context


def _assert_dicts_equal(result, expected):
    assert list(result.keys()) == list(expected.keys()) or set(result) == set(expected), (result, expected)
    for key, value in expected.items():
        got = result[key]
        if isinstance(value, np.ndarray):
            assert isinstance(got, np.ndarray), (key, got)
            assert got.shape == value.shape, (key, got, value)
            np.testing.assert_array_equal(got, value)
        else:
            assert not isinstance(got, np.ndarray), (key, got)
            assert got == value, (key, got, value)
            assert type(got) is type(value), (key, type(got), type(value))


def _run(coro):
    return asyncio.run(coro)


async def _collect(agen):
    return [item async for item in agen]


REQUESTS_ANY_KEYS = [
    Request({"b": np.array([[1, 2]]), "a": np.array([[1, 9]])}),
    Request({"b": np.array([[3, 4]])}),
    Request({"b": np.array([[7, 5], [8, 6]]), "a": np.array([[1, 1], [1, 1]])}),
    Request({"b": np.array([[1, 2], [1, 2]]), "a": np.array([[2, 4], [2, 4]])}),
    Request({"b": np.array([[1, 2], [1, 2], [9, 9]]), "a": np.array([[1, 1], [1, 1], [1, 1]])}),
    Request({"a": np.array([[1, 1], [1, 1], [1, 1]])}),
]


def _three_requests():
    return [
        Request({"b": np.array([[7, 5], [8, 6]]), "a": np.array([[1], [1]])}),
        Request({"b": np.array([[1, 2], [1, 2], [11, 12]]), "a": np.array([[1], [1], [1]])}),
        Request({"b": np.array([[1, 2]]), "a": np.array([[1]])}),
    ]


def _optionals_config(max_batch_size=8):
    return _config(
        inputs=(("x", "FP32", (2,)), ("temperature", "FP32", (1,)), ("text", "BYTES", (-1,)), ("k", "INT32", (-1, 2))),
        outputs=(("y", "FP32", (2,)),),
        max_batch_size=max_batch_size,
        optional=("temperature", "text", "k"),
    )
