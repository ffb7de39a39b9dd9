"""@group_by_keys, @group_by_values and ConstantPadder. No server needed."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

import numpy as np
import pytest

from pytriton.decorators import (
    ConstantPadder,
    PyTritonRuntimeError,
    batch,
    get_inference_request_batch_size,
    group_by_keys,
    group_by_values,
    triton_context,
)
from pytriton.exceptions import PyTritonValidationError
from pytriton.proxy.types import Request
from tests.decorators.helpers import (
    REQUESTS_ANY_KEYS,
    _assert_dicts_equal,
    _config,
    _inject,
    _run,
    _three_requests,
)


def test_group_by_keys_groups_and_keeps_request_order():
    calls = []

    @group_by_keys
    def fn(requests):
        keys = {tuple(sorted(r.keys())) for r in requests}
        assert len(keys) == 1
        calls.append((keys.pop(), len(requests)))
        k = len(requests[0].keys())
        return [{key: request[key] * k for key in request} for request in requests]

    results = fn(REQUESTS_ANY_KEYS)
    # called once per key set, in the order of the sorted key sets
    assert calls == [(("a",), 1), (("a", "b"), 4), (("b",), 1)]
    assert len(results) == len(REQUESTS_ANY_KEYS)
    for request, result in zip(REQUESTS_ANY_KEYS, results):
        assert set(request.keys()) == set(result.keys())
        for key, value in request.items():
            np.testing.assert_array_equal(result[key], value * len(request.keys()))


def test_group_by_keys_with_batch():
    @group_by_keys
    @batch
    def fn(**inputs):
        total = sum(v.sum(axis=1, keepdims=True) for v in inputs.values())
        return {"sum": total}

    results = fn(REQUESTS_ANY_KEYS)
    for request, result in zip(REQUESTS_ANY_KEYS, results):
        expected = sum(v.sum(axis=1, keepdims=True) for v in request.values())
        np.testing.assert_array_equal(result["sum"], expected)


def test_group_by_keys_wrong_number_of_results():
    @group_by_keys
    def fn(requests):
        return [{}]

    with pytest.raises(PyTritonValidationError, match="returned 1 results for 4 requests"):
        fn(REQUESTS_ANY_KEYS)


def test_group_by_keys_generator_single_group_passes_through():
    @group_by_keys
    @batch
    def fn(**inputs):
        yield {"a": inputs["a"]}
        yield {"a": inputs["a"] + 1}

    requests = _three_requests()
    parts = list(fn(requests))
    assert len(parts) == 2 and len(parts[1]) == 3
    np.testing.assert_array_equal(parts[1][1]["a"], requests[1]["a"] + 1)

    with pytest.raises(PyTritonRuntimeError, match="only when there is a single group"):
        fn(REQUESTS_ANY_KEYS)


def test_group_by_keys_async():
    @group_by_keys
    @batch
    async def fn(**inputs):
        await asyncio.sleep(0)
        return {"n": np.full((get_inference_request_batch_size(inputs), 1), len(inputs))}

    assert inspect.iscoroutinefunction(fn)
    results = _run(fn(REQUESTS_ANY_KEYS))
    assert [int(r["n"][0, 0]) for r in results] == [len(r) for r in REQUESTS_ANY_KEYS]


def _recording(calls: list, fn: Callable | None = None):
    def _fn(**inputs):
        calls.append({k: v.copy() for k, v in inputs.items()})
        return fn(**inputs) if fn else {"out": inputs["a"] * 10}

    return _fn


def test_group_by_values_numeric():
    calls = []
    fn = group_by_values("a")(_recording(calls))
    request = {
        "a": np.array([[1], [1], [1], [1], [1], [1], [2], [2], [2], [2]]),
        "b": np.array([[7, 5], [8, 6], [1, 2], [1, 2], [11, 12], [1, 2], [5, 6], [7, 2], [4, 2], [1, 122]]),
    }
    result = fn(**request)
    assert len(calls) == 2
    _assert_dicts_equal(calls[0], {"a": request["a"][:6], "b": request["b"][:6]})
    _assert_dicts_equal(calls[1], {"a": request["a"][6:], "b": request["b"][6:]})
    np.testing.assert_array_equal(result["out"], request["a"] * 10)


def test_group_by_values_interleaved_values_restore_order():
    calls = []

    def model(a, x):
        return {"y": x * 100 + a, "first": np.full((len(a), 1), a[0, 0])}

    fn = group_by_values("a")(_recording(calls, model))
    a = np.array([[3], [1], [3], [2], [1]])
    x = np.arange(5).reshape(5, 1)
    result = fn(a=a, x=x)
    assert [c["a"][0, 0] for c in calls] == [1, 2, 3]
    np.testing.assert_array_equal(result["y"], x * 100 + a)
    np.testing.assert_array_equal(result["first"], a)


def test_group_by_values_object_bytes_values():
    calls = []

    def model(s, a):
        return {"out": np.array([[item + b"!"] for item in s], dtype=object)}

    fn = group_by_values("s")(_recording(calls, model))
    t1, t2 = b"t" + b"1", b"t" + b"2"  # not interned
    s = np.array([t1, t2, t1, b"t1", t2], dtype=object)
    result = fn(s=s, a=np.arange(5))
    assert len(calls) == 2
    assert calls[0]["s"].tolist() == [b"t1", b"t1", b"t1"]
    assert calls[0]["a"].tolist() == [0, 2, 3]
    assert calls[1]["s"].tolist() == [b"t2", b"t2"]
    assert result["out"].dtype == object
    assert result["out"][:, 0].tolist() == [b"t1!", b"t2!", b"t1!", b"t1!", b"t2!"]


def test_group_by_values_2d_string_values_and_fixed_width_bytes():
    calls = []

    def model(s, a):
        return {"out": a}

    fn = group_by_values("s")(_recording(calls, model))
    s = np.array([["t1", "t1"], ["t2", "t2"], ["t1", "t1"], ["t2", "t1"]], dtype=object)
    result = fn(s=s, a=np.arange(4))
    assert [c["a"].tolist() for c in calls] == [[0, 2], [3], [1]]
    np.testing.assert_array_equal(result["out"], np.arange(4))

    calls.clear()
    s_bytes = np.array([[b"x"], [b"yy"], [b"x"]])  # fixed-width |S2
    result = fn(s=s_bytes, a=np.arange(3))
    assert [c["a"].tolist() for c in calls] == [[0, 2], [1]]


def test_group_by_values_multiple_keys():
    calls = []
    fn = group_by_values("a", "s")(_recording(calls, lambda a, s: {"out": a}))
    a = np.array([[1], [1], [2], [1], [2]])
    s = np.array([b"p", b"q", b"p", b"p", b"p"], dtype=object)
    fn(a=a, s=s)
    assert [(c["a"][:, 0].tolist(), c["s"].tolist()) for c in calls] == [
        ([1, 1], [b"p", b"p"]),
        ([1], [b"q"]),
        ([2, 2], [b"p", b"p"]),
    ]


def test_group_by_values_missing_key_is_ignored():
    calls = []
    fn = group_by_values("temperature")(_recording(calls))
    result = fn(a=np.array([[1], [2]]))
    assert len(calls) == 1
    np.testing.assert_array_equal(result["out"], [[10], [20]])


def test_group_by_values_different_shapes_without_pad_fn():
    def model(a, n):
        return {"out": np.zeros((len(a), int(n[0, 0])), dtype=np.float32)}

    fn = group_by_values("n")(model)
    with pytest.raises(PyTritonRuntimeError, match="different shapes"):
        fn(a=np.arange(3), n=np.array([[1], [2], [1]]))


def test_group_by_values_with_constant_padder():
    def model(a, n):
        width = int(n[0, 0])
        return {"out": np.full((len(a), width), width, dtype=np.float32), "same": a}

    fn = group_by_values("n", pad_fn=ConstantPadder(-1))(model)
    result = fn(a=np.arange(3), n=np.array([[1], [3], [1]]))
    assert result["out"].dtype == np.float32
    np.testing.assert_array_equal(result["out"], [[1, -1, -1], [3, 3, 3], [1, -1, -1]])
    np.testing.assert_array_equal(result["same"], [0, 1, 2])


def test_group_by_values_with_constant_padder_bytes_outputs():
    def model(a, n):
        width = int(n[0])
        return {"text": np.array([[b"x" * width] * width] * len(a))}  # fixed width bytes

    fn = group_by_values("n", pad_fn=ConstantPadder())(model)
    result = fn(a=np.arange(3), n=np.array([2, 1, 2]))
    assert result["text"].dtype == np.dtype("S2")
    assert result["text"].tolist() == [[b"xx", b"xx"], [b"x", b""], [b"xx", b"xx"]]


def test_group_by_values_bytes_outputs_of_different_width_are_not_truncated():
    def model(s):
        return {"echo": np.array([item * 3 for item in s])}

    fn = group_by_values("s")(model)
    result = fn(s=np.array([b"a", b"bb", b"a"]))
    assert result["echo"].tolist() == [b"aaa", b"bbbbbb", b"aaa"]


def test_group_by_values_must_be_below_batch():
    @group_by_values("a")
    @batch
    def fn(**inputs):
        return inputs

    with pytest.raises(PyTritonRuntimeError, match="must be used after the @batch decorator"):
        fn(a=np.array([[1]]))


def test_group_by_values_without_batched_inputs():
    @group_by_values("a")
    def fn(requests):
        return requests

    with pytest.raises(PyTritonRuntimeError, match="after the @batch decorator"):
        fn([Request({"a": np.array([[1]])})])


def test_group_by_values_list_outputs_and_context_passthrough():
    received = []

    @group_by_values("a")
    @triton_context
    def fn(a, b, triton_context):
        received.append(triton_context)
        return [a, b]

    context = _inject(_config(), fn)
    result = fn(a=np.array([[1], [2], [1]]), b=np.array([[4], [5], [6]]))
    assert received == [context, context]
    np.testing.assert_array_equal(result["b"], [[4], [5], [6]])


def test_group_by_values_async():
    @batch
    @group_by_values("a")
    async def fn(a, b):
        await asyncio.sleep(0)
        return {"out": b + a[0]}

    assert inspect.iscoroutinefunction(fn)
    requests = [
        Request({"a": np.array([[1], [2]]), "b": np.array([[10], [20]])}),
        Request({"a": np.array([[1]]), "b": np.array([[30]])}),
    ]
    results = _run(fn(requests))
    np.testing.assert_array_equal(results[0]["out"], [[11], [22]])
    np.testing.assert_array_equal(results[1]["out"], [[31]])


def test_group_by_values_generator_single_group_passes_through():
    @batch
    @group_by_values("n")
    def fn(x, n):
        for step in range(2):
            yield {"y": x + step}

    requests = [Request({"x": np.array([[1], [2]]), "n": np.array([[3], [3]])})]
    parts = list(fn(requests))
    assert [p[0]["y"].tolist() for p in parts] == [[[1], [2]], [[2], [3]]]

    requests = [Request({"x": np.array([[1], [2]]), "n": np.array([[3], [4]])})]
    with pytest.raises(PyTritonRuntimeError, match="only when there is a single group"):
        fn(requests)


def test_constant_padder_numeric():
    padder = ConstantPadder(pad_value=7)
    batches = [
        {"x": np.ones((2, 1, 3), dtype=np.int32), "y": np.zeros((2,), dtype=np.float64)},
        {"x": np.ones((1, 2, 1), dtype=np.int32)},
    ]
    padded = padder(batches)
    assert len(padded) == 2
    assert padded[0]["x"].shape == (2, 2, 3) and padded[1]["x"].shape == (1, 2, 3)
    assert padded[0]["x"].dtype == np.int32
    np.testing.assert_array_equal(padded[0]["x"][0], [[1, 1, 1], [7, 7, 7]])
    np.testing.assert_array_equal(padded[1]["x"][0], [[1, 7, 7], [1, 7, 7]])
    assert "y" in padded[0] and "y" not in padded[1]


def test_constant_padder_default_zero_and_strings():
    padded = ConstantPadder()(
        [
            {"s": np.array([[b"a"]]), "u": np.array([["abc", "d"]]), "o": np.array([[b"q"]], dtype=object)},
            {"s": np.array([[b"abc", b"de"]]), "u": np.array([["x"]]), "o": np.array([[b"q", b"r"]], dtype=object)},
            {"n": np.array([[1]])},
        ]
    )
    assert padded[0]["s"].dtype == np.dtype("S3") and padded[0]["s"].tolist() == [[b"a", b""]]
    assert padded[1]["u"].tolist() == [["x", ""]] and padded[1]["u"].dtype == np.dtype("<U3")
    assert padded[0]["o"].tolist() == [[b"q", b""]] and padded[0]["o"].dtype == object
    np.testing.assert_array_equal(padded[2]["n"], [[1]])


def test_constant_padder_dtype_mismatch():
    with pytest.raises(PyTritonRuntimeError, match="must have the same dtype"):
        ConstantPadder()([{"x": np.zeros((1, 1), dtype=np.float32)}, {"x": np.zeros((1, 2), dtype=np.float64)}])
    with pytest.raises(PyTritonRuntimeError, match="must have the same dtype"):
        ConstantPadder()([{"x": np.zeros((1, 1), dtype=np.float32)}, {"x": np.array([[b"a"]])}])
