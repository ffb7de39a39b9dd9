"""The public surface of pytriton.decorators and decorators stacked as in PyTriton's docs and examples. No server needed."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import numpy as np
import pytest
import wrapt

from pytriton.decorators import (
    TRITON_CONTEXT_FIELD_NAME,
    InferenceRequest,
    InferenceRequests,
    InferenceResult,
    InferenceResults,
    InputNames,
    ModelConfigDict,
    PyTritonRuntimeError,
    TritonContext,
    batch,
    fill_optionals,
    first_value,
    get_inference_request_batch_size,
    group_by_keys,
    group_by_values,
    triton_context,
)
from pytriton.exceptions import PyTritonError, PyTritonValidationError
from pytriton.proxy.types import Request
from tests.decorators.helpers import (
    _config,
    _inject,
    _optionals_config,
    _run,
)


def test_public_types_and_constants():
    assert TRITON_CONTEXT_FIELD_NAME == "triton_context"
    assert InputNames == list[str]
    for alias in (InferenceRequest, InferenceRequests, InferenceResult, InferenceResults):
        assert alias is not None
    assert issubclass(PyTritonRuntimeError, PyTritonError)
    context = TritonContext()
    assert isinstance(context.model_configs, ModelConfigDict)
    assert TritonContext().model_configs is not context.model_configs  # default_factory


def test_get_inference_request_batch_size():
    assert get_inference_request_batch_size({"a": np.zeros((3, 2)), "b": np.zeros((3,))}) == 3
    assert get_inference_request_batch_size(Request({"x": np.zeros((5, 1))})) == 5
    with pytest.raises(PyTritonValidationError):
        get_inference_request_batch_size({})


def test_stack_batch_group_by_values_first_value():
    calls = []

    @batch
    @group_by_values("img_size")
    @first_value("img_size")
    def fn(images, img_size):
        calls.append(img_size)
        assert isinstance(img_size, np.int64)
        return {"out": images[:, :img_size].sum(axis=1, keepdims=True)}

    _inject(_config(inputs=(("images", "INT64", (4,)), ("img_size", "INT64", (1,)))), fn)
    images = np.arange(20).reshape(5, 4)
    sizes = np.array([[2], [3], [2], [4], [3]])
    requests = [
        Request({"images": images[:2], "img_size": sizes[:2]}),
        Request({"images": images[2:5], "img_size": sizes[2:5]}),
    ]
    results = fn(requests)
    assert calls == [2, 3, 4]
    expected = np.array([images[i, : sizes[i, 0]].sum() for i in range(5)]).reshape(5, 1)
    np.testing.assert_array_equal(results[0]["out"], expected[:2])
    np.testing.assert_array_equal(results[1]["out"], expected[2:])


def test_stack_as_in_docs():
    seen = []

    @fill_optionals(temperature=np.array([0.7], dtype=np.float32))
    @group_by_keys
    @batch
    @group_by_values("temperature")
    @first_value("temperature")
    @triton_context
    def infer(triton_context, x, temperature, text=None, k=None):
        model_config = triton_context.model_configs[infer]
        seen.append((model_config.model_name, round(float(temperature), 3), text is not None, len(x)))
        return {"y": x * temperature}

    _inject(_optionals_config(), infer)
    requests = [
        Request({"x": np.ones((1, 2), dtype=np.float32)}),
        Request({"x": np.ones((2, 2), dtype=np.float32), "temperature": np.full((2, 1), 2, dtype=np.float32)}),
        Request({"x": np.ones((1, 2), dtype=np.float32), "text": np.array([[b"t"]], dtype=object)}),
    ]
    results = infer(requests)
    # groups of keys in sorted order; within one, sub-batches by temperature value
    # key groups in sorted order: ("temperature", "text", "x") < ("temperature", "x"); then one call per temperature
    assert seen[0] == ("model", 0.7, True, 1)
    assert sorted(seen[1:]) == [("model", 0.7, False, 1), ("model", 2.0, False, 2)]
    np.testing.assert_allclose(results[0]["y"], [[0.7, 0.7]])
    np.testing.assert_allclose(results[1]["y"], [[2, 2], [2, 2]])
    np.testing.assert_allclose(results[2]["y"], [[0.7, 0.7]])


def test_stack_on_class_method():
    class Model:
        def __init__(self):
            self.calls = 0

        @batch
        @group_by_values("n")
        @first_value("n")
        @triton_context
        def infer(self, x, n, triton_context):
            self.calls += 1
            assert triton_context.model_configs[self.infer].model_name == "model"
            return [x * n, x]

    model = Model()
    _inject(_config(inputs=(("x", "INT64", (1,)), ("n", "INT64", (1,)))), model.infer)
    results = model.infer(
        [
            Request({"x": np.array([[1], [2]]), "n": np.array([[2], [3]])}),
            Request({"x": np.array([[5]]), "n": np.array([[2]])}),
        ]
    )
    assert model.calls == 2
    np.testing.assert_array_equal(results[0]["a"], [[2], [6]])
    np.testing.assert_array_equal(results[1]["a"], [[10]])


def test_stack_async_full():
    @fill_optionals(temperature=np.array([0.5], dtype=np.float32))
    @group_by_keys
    @batch
    @group_by_values("temperature")
    @first_value("temperature")
    async def infer(x, temperature, **_):
        await asyncio.sleep(0)
        return {"y": x * temperature}

    _inject(_optionals_config(), infer)
    assert inspect.iscoroutinefunction(infer)
    requests = [
        Request({"x": np.ones((1, 2), dtype=np.float32)}),
        Request({"x": np.ones((1, 2), dtype=np.float32), "temperature": np.array([[3]], dtype=np.float32)}),
    ]
    results = _run(infer(requests))
    np.testing.assert_allclose(results[0]["y"], [[0.5, 0.5]])
    np.testing.assert_allclose(results[1]["y"], [[3, 3]])


def test_decorators_keep_signature_and_name():
    @batch
    @first_value("a")
    def infer_fn(a, b):
        """Docstring."""
        return {"a": a}

    assert infer_fn.__name__ == "infer_fn"
    assert infer_fn.__doc__ == "Docstring."
    assert list(inspect.signature(infer_fn).parameters) == ["a", "b"]
    assert isinstance(infer_fn, wrapt.FunctionWrapper)


def test_requests_are_request_objects_not_only_dicts():
    calls: list[Any] = []

    @group_by_keys
    def fn(requests):
        calls.append(type(requests[0]))
        return [dict(r.items()) for r in requests]

    fn([Request({"a": np.array([1])}, parameters={"p": 1})])
    assert calls == [Request]
