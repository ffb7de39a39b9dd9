"""@fill_optionals and @pad_batch. No server needed."""

from __future__ import annotations

import numpy as np
import pytest

from pytriton.decorators import (
    PyTritonRuntimeError,
    batch,
    fill_optionals,
    group_by_keys,
    pad_batch,
    triton_context,
)
from pytriton.exceptions import PyTritonBadParameterError, PyTritonValidationError
from pytriton.proxy.types import Request
from tests.decorators.helpers import (
    _config,
    _inject,
    _optionals_config,
)


def test_fill_optionals_tiles_to_batch_size_and_keeps_present():
    seen = []

    @fill_optionals(temperature=np.array([0.7], dtype=np.float32), text=np.array([b"default"], dtype=object))
    def fn(requests):
        seen.extend(requests)
        return [{"y": r["x"]} for r in requests]

    _inject(_optionals_config(), fn)
    requests = [
        Request({"x": np.zeros((3, 2), dtype=np.float32)}),
        Request({"x": np.zeros((1, 2), dtype=np.float32), "temperature": np.array([[0.1]], dtype=np.float32)}),
    ]
    fn(requests)
    assert seen[0]["temperature"].shape == (3, 1) and seen[0]["temperature"].dtype == np.float32
    np.testing.assert_allclose(seen[0]["temperature"], 0.7)
    assert seen[0]["text"].shape == (3, 1) and seen[0]["text"].tolist() == [[b"default"]] * 3
    np.testing.assert_allclose(seen[1]["temperature"], [[0.1]])  # present input is kept
    assert seen[1]["text"].shape == (1, 1)


def test_fill_optionals_non_batching_model_does_not_tile():
    seen = []
    default = np.array([0.5], dtype=np.float32)

    @fill_optionals(temperature=default)
    def fn(requests):
        seen.extend(requests)
        return [{}]

    _inject(_optionals_config(max_batch_size=0), fn)
    fn([Request({"x": np.zeros((2,), dtype=np.float32)})])
    np.testing.assert_array_equal(seen[0]["temperature"], default)
    assert seen[0]["temperature"].shape == (1,)


def test_fill_optionals_accepts_fixed_width_bytes_and_dynamic_dims():
    @fill_optionals(text=np.array([b"a", b"bc"]), k=np.zeros((3, 2), dtype=np.int32))
    def fn(requests):
        return requests

    _inject(_optionals_config(), fn)
    (request,) = fn([Request({"x": np.zeros((2, 2), dtype=np.float32)})])
    assert request["text"].shape == (2, 2) and request["k"].shape == (2, 3, 2)


@pytest.mark.parametrize(
    "defaults, match",
    [
        ({"unknown": np.array([1.0], dtype=np.float32)}, "Could not found unknown inputs"),
        ({"temperature": 0.7}, "Could not use temperature=0.7 defaults as they are not NumPy arrays"),
        ({"temperature": [0.7]}, "as they are not NumPy arrays"),
        ({"temperature": np.array([0.7])}, "temperature: dtype=float64 .*different than input signature dtypes"),
        ({"text": np.array([1, 2])}, "text: dtype=int64 .*different than input signature dtypes"),
        ({"temperature": np.array([0.7, 0.1], dtype=np.float32)}, r"temperature: shape=\(2,\) expected_shape=\(1,\)"),
        ({"temperature": np.array(0.7, dtype=np.float32)}, "different than input signature shapes"),
        ({"k": np.zeros((3, 3), dtype=np.int32)}, "different than input signature shapes"),
    ],
)
def test_fill_optionals_validation_errors(defaults, match):
    @fill_optionals(**defaults)
    def fn(requests):
        return requests

    _inject(_optionals_config(), fn)
    with pytest.raises(PyTritonBadParameterError, match=match):
        fn([Request({"x": np.zeros((1, 2), dtype=np.float32)})])


def test_fill_optionals_needs_bound_model():
    @fill_optionals(temperature=np.array([0.7], dtype=np.float32))
    def fn(requests):
        return requests

    with pytest.raises(PyTritonValidationError, match="__triton_context__"):
        fn([Request({"x": np.zeros((1, 2), dtype=np.float32)})])


def test_fill_optionals_group_by_keys_batch_stack():
    calls = []

    @fill_optionals(temperature=np.array([0.7], dtype=np.float32))
    @group_by_keys
    @batch
    def fn(x, temperature):
        calls.append(len(x))
        return {"y": x * temperature}

    _inject(_optionals_config(), fn)
    requests = [
        Request({"x": np.ones((1, 2), dtype=np.float32)}),
        Request({"x": np.ones((2, 2), dtype=np.float32), "temperature": np.full((2, 1), 2, dtype=np.float32)}),
    ]
    results = fn(requests)
    assert calls == [3]  # one group thanks to the filled default
    np.testing.assert_allclose(results[0]["y"], [[0.7, 0.7]])
    np.testing.assert_allclose(results[1]["y"], [[2, 2], [2, 2]])


_INPUT_BATCH = {"b": np.array([[1, 2], [1, 2], [9, 9]]), "a": np.array([[1], [1], [1]])}


def test_pad_batch_to_preferred_batch_size():
    @pad_batch
    def fn(**inputs):
        assert inputs["a"].shape[0] == 4 and inputs["b"].shape[0] == 4
        np.testing.assert_array_equal(inputs["a"], [[1], [1], [1], [1]])
        np.testing.assert_array_equal(inputs["b"], [[1, 2], [1, 2], [9, 9], [9, 9]])
        return inputs

    _inject(_config(max_batch_size=8, preferred_batch_size=[6, 2, 4]), fn)
    results = fn(**dict(_INPUT_BATCH))
    assert results["a"].shape[0] == 4 and results["b"].shape[0] == 4


def test_pad_batch_to_max_batch_size():
    @pad_batch
    def fn(**inputs):
        np.testing.assert_array_equal(inputs["a"], [[1]] * 8)
        np.testing.assert_array_equal(inputs["b"], [[1, 2], [1, 2]] + [[9, 9]] * 6)
        return inputs

    _inject(_config(max_batch_size=8), fn)
    results = fn(**dict(_INPUT_BATCH))
    assert results["a"].shape[0] == 8

    _inject(_config(max_batch_size=8, preferred_batch_size=[2]), fn)
    assert fn(**dict(_INPUT_BATCH))["a"].shape[0] == 8


def test_pad_batch_exact_size_and_too_big():
    @pad_batch
    def fn(**inputs):
        return inputs

    _inject(_config(max_batch_size=8, preferred_batch_size=[3]), fn)
    assert fn(**dict(_INPUT_BATCH))["a"].shape[0] == 3
    _inject(_config(max_batch_size=2), fn)
    with pytest.raises(PyTritonRuntimeError, match="exceeds max batch size 2"):
        fn(**dict(_INPUT_BATCH))


def test_pad_batch_keeps_triton_context_kwarg():
    @triton_context
    @pad_batch
    def fn(a, triton_context):
        return {"a": a, "n": np.array([len(a)])}

    context = _inject(_config(max_batch_size=4), fn)
    result = fn(a=np.array([[1], [2]]))
    assert result["a"].shape == (4, 1)
    del context


def test_batch_above_pad_batch_drops_padding_rows():
    @batch
    @pad_batch
    def fn(a, b):
        assert len(a) == 4
        return {"a": a * 2, "b": b}

    _inject(_config(max_batch_size=8, preferred_batch_size=[4]), fn)
    requests = [
        Request({"a": np.array([[1], [2]]), "b": np.array([[1, 1], [2, 2]])}),
        Request({"a": np.array([[3]]), "b": np.array([[3, 3]])}),
    ]
    results = fn(requests)
    np.testing.assert_array_equal(results[0]["a"], [[2], [4]])
    np.testing.assert_array_equal(results[1]["a"], [[6]])
