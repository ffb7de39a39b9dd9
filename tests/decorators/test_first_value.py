"""@first_value. No server needed."""

from __future__ import annotations

import numpy as np
import pytest

from pytriton.decorators import (
    PyTritonRuntimeError,
    first_value,
)
from pytriton.exceptions import PyTritonBadParameterError
from pytriton.proxy.types import Request
from tests.decorators.helpers import (
    _assert_dicts_equal,
    _config,
    _inject,
)


@pytest.mark.parametrize(
    "inputs, keys, expected",
    [
        (  # scalar from 1D array
            {"a": np.array([1, 2, 3]), "b": np.array([1, 1, 1])},
            ["b"],
            {"a": np.array([1, 2, 3]), "b": np.int64(1)},
        ),
        (  # scalar from (batch, 1, 1)
            {"a": np.array([1, 2, 3]), "b": np.array([[[1]], [[1]], [[1]]])},
            ["b"],
            {"a": np.array([1, 2, 3]), "b": np.int64(1)},
        ),
        (  # 2D sample from (batch, 2, 1): no squeeze
            {"a": np.array([1, 2, 3]), "b": np.array([[[1], [2]], [[1], [2]], [[1], [2]]])},
            ["b"],
            {"a": np.array([1, 2, 3]), "b": np.array([[1], [2]])},
        ),
        (  # strings (object)
            {"a": np.array([1, 2, 3]), "b": np.array(["val1", "val1"], dtype=object)},
            ["b"],
            {"a": np.array([1, 2, 3]), "b": "val1"},
        ),
        (  # strings (object) of shape (batch, 1, 1)
            {"a": np.array([1, 2, 3]), "b": np.array([[["val1"]], [["val1"]]], dtype=object)},
            ["b"],
            {"a": np.array([1, 2, 3]), "b": "val1"},
        ),
        (  # bytes (object) rows of 2 equal values
            {"a": np.array([1]), "b": np.array([[b"x", b"y"], [b"x", b"y"]], dtype=object)},
            ["b"],
            {"a": np.array([1]), "b": np.array([b"x", b"y"], dtype=object)},
        ),
        (  # missing key is ignored
            {"a": np.array([1, 2, 3]), "b": np.array([1, 1, 1])},
            ["c"],
            {"a": np.array([1, 2, 3]), "b": np.array([1, 1, 1])},
        ),
        (
            {"a": np.array([1, 2, 3]), "b": np.array([1, 1, 1])},
            ["b", "c"],
            {"a": np.array([1, 2, 3]), "b": np.int64(1)},
        ),
        (  # two inputs
            {"a": np.array([2, 2, 2]), "b": np.array([[1.5], [1.5], [1.5]], dtype=np.float32)},
            ["a", "b"],
            {"a": np.int64(2), "b": np.float32(1.5)},
        ),
    ],
)
def test_first_value_with_batched_kwargs(inputs, keys, expected):
    received = {}

    @first_value(*keys)
    def fn(**_inputs):
        received.update(_inputs)
        return _inputs

    _inject(_config(), fn)
    result = fn(**inputs)
    _assert_dicts_equal(result, expected)
    _assert_dicts_equal(received, expected)


def test_first_value_with_requests():
    @first_value("b", "optional")
    def fn(requests):
        return requests

    _inject(_config(), fn)
    requests = [
        Request({"a": np.array([1, 2, 3]), "b": np.array([[[1]], [[1]], [[1]]])}),
        Request({"a": np.array([1, 2]), "b": np.array([[[5]], [[5]]])}),
    ]
    results = fn(requests)
    assert len(results) == 2
    assert results[0]["b"] == 1 and isinstance(results[0]["b"], np.int64)
    assert results[1]["b"] == 5
    np.testing.assert_array_equal(results[1]["a"], [1, 2])


def test_first_value_no_squeeze():
    @first_value("b", squeeze_single_values=False)
    def fn(**inputs):
        return inputs

    _inject(_config(), fn)
    result = fn(b=np.array([[[1]], [[1]]]))
    assert isinstance(result["b"], np.ndarray) and result["b"].shape == (1, 1)
    result = fn(b=np.array([3, 3]))
    assert result["b"] == 3 and isinstance(result["b"], np.int64)


def test_first_value_strict():
    @first_value("a")
    def fn(**inputs):
        return inputs

    _inject(_config(), fn)
    with pytest.raises(PyTritonRuntimeError, match="The values on the 'a' input are not equal"):
        fn(a=np.array([[1], [2], [2]]))
    with pytest.raises(PyTritonRuntimeError, match="disable strict mode"):
        fn(a=np.array([b"x", b"y"], dtype=object))
    with pytest.raises(PyTritonRuntimeError, match="not equal"):
        fn(a=np.array([[b"x", b"y"], [b"x", b"z"]], dtype=object))
    assert fn(a=np.array([np.nan, np.nan]))["a"] != 0  # NaNs are equal for the check

    @first_value("a", strict=False)
    def lenient(**inputs):
        return inputs

    _inject(_config(), lenient)
    assert lenient(a=np.array([[1], [2], [2]]))["a"] == 1


def test_first_value_requires_batching_model():
    @first_value("a")
    def fn(**inputs):
        return inputs

    _inject(_config(max_batch_size=0), fn)
    with pytest.raises(PyTritonRuntimeError, match="can only be used with models that support batching"):
        fn(a=np.array([[1], [2], [2]]))


def test_first_value_rejects_special_keys():
    with pytest.raises(PyTritonBadParameterError, match="not allowed as keys for @first_value wrapper"):
        first_value("__triton_context__")
