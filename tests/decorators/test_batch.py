"""convert_output, @batch and @sample. No server needed."""

from __future__ import annotations

import asyncio
import inspect

import numpy as np
import pytest

from pytriton.decorators import (
    batch,
    convert_output,
    sample,
)
from pytriton.exceptions import PyTritonValidationError
from pytriton.proxy.types import Request
from tests.decorators.helpers import (
    REQUESTS_ANY_KEYS,
    _collect,
    _config,
    _inject,
    _run,
    _three_requests,
)


def test_convert_output_dict_passthrough_without_config():
    outputs = {"x": np.array([1])}
    assert convert_output(outputs) is outputs


def test_convert_output_list_and_tuple_in_config_order():
    cfg = _config(outputs=(("second", "INT64", (-1,)), ("first", "INT64", (-1,))))
    x, y = np.array([1]), np.array([2])
    for container in (list, tuple):
        result = convert_output(container([x, y]), model_config=cfg)
        assert list(result) == ["second", "first"]
        assert result["second"] is x and result["first"] is y


def test_convert_output_list_uses_config_of_wrapped():
    def fn():
        pass

    _inject(_config(outputs=(("o1", "FP32", (1,)), ("o2", "FP32", (1,)))), fn)
    result = convert_output([np.zeros(1), np.ones(1)], fn, None)
    assert list(result) == ["o1", "o2"]


def test_convert_output_errors():
    cfg = _config()
    with pytest.raises(PyTritonValidationError, match="Outputs length different than config outputs length"):
        convert_output([np.array([1])], model_config=cfg)
    with pytest.raises(PyTritonValidationError, match="Unsupported output type"):
        convert_output(np.array([1]), model_config=cfg)
    with pytest.raises(PyTritonValidationError, match="Unsupported output type"):
        convert_output(None, model_config=cfg)


def test_batch_concatenates_and_splits_per_request():
    seen = {}

    @batch
    def fn(**inputs):
        seen.update(inputs)
        return {"a": inputs["a"] * 2, "b": inputs["b"] * 3}

    requests = _three_requests()
    results = fn(requests)
    assert set(seen) == {"a", "b"}
    assert seen["a"].shape == (6, 1) and seen["b"].shape == (6, 2)
    np.testing.assert_array_equal(seen["b"], np.concatenate([r["b"] for r in requests]))
    assert len(results) == 3
    for request, result in zip(requests, results):
        assert set(result) == {"a", "b"}
        np.testing.assert_array_equal(result["a"], request["a"] * 2)
        np.testing.assert_array_equal(result["b"], request["b"] * 3)


def test_batch_passes_a_single_request_without_copying():
    seen = {}

    @batch
    def fn(a):
        seen["a"] = a
        return {"a": a * 2}

    data = np.arange(8, dtype=np.float32).reshape(2, 4)
    data.flags.writeable = False  # as the worker hands inputs over: read-only views of shared memory
    (result,) = fn([Request({"a": data}, {})])
    assert seen["a"] is data
    np.testing.assert_array_equal(result["a"], data * 2)
    two = fn([Request({"a": data}, {}), Request({"a": data}, {})])  # several requests: one new batch array
    assert not np.shares_memory(seen["a"], data) and seen["a"].shape == (4, 4)
    np.testing.assert_array_equal(two[1]["a"], data * 2)


def test_batch_named_parameters_and_extra_args():
    @batch
    def fn(a, b):
        return {"add": a + b, "sub": a - b}

    requests = [
        Request({"a": np.array([[1], [2]]), "b": np.array([[10], [20]])}),
        Request({"a": np.array([[3]]), "b": np.array([[30]])}),
    ]
    results = fn(requests)
    np.testing.assert_array_equal(results[0]["add"], [[11], [22]])
    np.testing.assert_array_equal(results[1]["sub"], [[-27]])


@pytest.mark.parametrize("container", [list, tuple])
def test_batch_list_or_tuple_outputs_use_config_order(container):
    @batch
    def fn(**inputs):
        return container([inputs["a"] * 2, inputs["b"] * 3])

    _inject(_config(), fn)
    requests = _three_requests()
    results = fn(requests)
    for request, result in zip(requests, results):
        assert list(result) == ["a", "b"]
        np.testing.assert_array_equal(result["a"], request["a"] * 2)
        np.testing.assert_array_equal(result["b"], request["b"] * 3)


def test_batch_list_outputs_length_mismatch():
    @batch
    def fn(**inputs):
        return [inputs["a"]]

    _inject(_config(), fn)
    with pytest.raises(PyTritonValidationError, match="Outputs length different than config outputs length"):
        fn(_three_requests())


def test_batch_requests_with_different_keys():
    @batch
    def fn(**inputs):
        return inputs

    with pytest.raises(PyTritonValidationError, match="Cannot batch requests with different set of inputs keys"):
        fn(REQUESTS_ANY_KEYS)


def test_batch_keys_in_different_order_are_fine():
    @batch
    def fn(**inputs):
        return {"out": inputs["x"] + inputs["y"]}

    results = fn(
        [
            Request({"x": np.array([[1]]), "y": np.array([[2]])}),
            Request({"y": np.array([[20]]), "x": np.array([[10]])}),
        ]
    )
    np.testing.assert_array_equal(results[1]["out"], [[30]])


@pytest.mark.parametrize("rows", [5, 7])
def test_batch_wrong_output_batch_size(rows):
    @batch
    def fn(**inputs):
        return {"a": np.zeros((rows, 1)), "b": inputs["b"]}

    with pytest.raises(
        ValueError, match=rf"Received output tensors with different batch sizes: a: \({rows}, 1\)"
    ) as info:
        fn(_three_requests())
    assert "Expected batch size: 6" in str(info.value)
    assert isinstance(info.value, PyTritonValidationError)


def test_batch_output_not_array_or_without_batch_axis():
    @batch
    def not_array(**inputs):
        return {"a": [1, 2, 3, 4, 5, 6]}

    with pytest.raises(PyTritonValidationError, match="must be a numpy array"):
        not_array(_three_requests())

    @batch
    def scalar(**inputs):
        return {"a": np.array(1)}

    with pytest.raises(ValueError, match="no batch axis"):
        scalar(_three_requests())


def test_batch_unsupported_output_type():
    @batch
    def fn(**inputs):
        return inputs["a"]

    with pytest.raises(PyTritonValidationError, match="Unsupported output type"):
        fn(_three_requests())


def test_batch_bytes_inputs():
    @batch
    def fn(text):
        assert text.dtype == object and text.shape == (3, 1)
        return {"upper": np.array([[t[0].upper()] for t in text], dtype=object)}

    requests = [
        Request({"text": np.array([[b"ab"], [b"c"]], dtype=object)}),
        Request({"text": np.array([[b"hello"]], dtype=object)}),
    ]
    results = fn(requests)
    assert results[0]["upper"].tolist() == [[b"AB"], [b"C"]]
    assert results[1]["upper"].tolist() == [[b"HELLO"]]


def test_batch_empty_request_list():
    @batch
    def fn(**inputs):
        raise AssertionError("not called")

    assert fn([]) == []

    @batch
    async def afn(**inputs):
        raise AssertionError("not called")

    assert _run(afn([])) == []


def test_batch_generator_yields_per_request_lists():
    @batch
    def fn(**inputs):
        for step in range(3):
            yield {"a": inputs["a"] + step, "b": inputs["b"]}

    requests = _three_requests()
    gen = fn(requests)
    assert inspect.isgenerator(gen)
    parts = list(gen)
    assert len(parts) == 3
    for step, part in enumerate(parts):
        assert len(part) == 3
        for request, result in zip(requests, part):
            np.testing.assert_array_equal(result["a"], request["a"] + step)
            np.testing.assert_array_equal(result["b"], request["b"])


def test_batch_generator_validates_each_yield():
    @batch
    def fn(**inputs):
        yield {"a": inputs["a"]}
        yield {"a": inputs["a"][:1]}

    gen = fn(_three_requests())
    assert len(next(gen)) == 3
    with pytest.raises(ValueError, match="Expected batch size: 6"):
        next(gen)


def test_batch_generator_list_outputs():
    @batch
    def fn(**inputs):
        yield [inputs["a"], inputs["b"]]

    _inject(_config(), fn)
    (part,) = list(fn(_three_requests()))
    assert list(part[0]) == ["a", "b"]


def test_batch_async_function():
    @batch
    async def fn(**inputs):
        await asyncio.sleep(0)
        return {"a": inputs["a"] * 2, "b": inputs["b"]}

    assert inspect.iscoroutinefunction(fn)
    requests = _three_requests()
    coro = fn(requests)
    assert inspect.isawaitable(coro)
    results = _run(coro)
    assert len(results) == 3
    for request, result in zip(requests, results):
        np.testing.assert_array_equal(result["a"], request["a"] * 2)


def test_batch_async_function_list_outputs_and_errors():
    @batch
    async def fn(**inputs):
        return [inputs["a"], inputs["b"]]

    _inject(_config(), fn)
    results = _run(fn(_three_requests()))
    assert list(results[2]) == ["a", "b"]

    @batch
    async def wrong(**inputs):
        return {"a": inputs["a"][:2]}

    with pytest.raises(ValueError, match="Expected batch size: 6"):
        _run(wrong(_three_requests()))


def test_batch_async_generator():
    @batch
    async def fn(**inputs):
        for step in range(2):
            await asyncio.sleep(0)
            yield {"a": inputs["a"] + step}

    assert inspect.isasyncgenfunction(fn)
    agen = fn(_three_requests())
    assert inspect.isasyncgen(agen)
    parts = _run(_collect(agen))
    assert len(parts) == 2
    np.testing.assert_array_equal(parts[1][2]["a"], [[2]])


def test_batch_on_method_and_callable_object():
    class Model:
        def __init__(self):
            self.factor = 10

        @batch
        def infer(self, **inputs):
            return [inputs["a"] * self.factor, inputs["b"]]

        @batch
        def __call__(self, **inputs):
            return (inputs["a"] * self.factor, inputs["b"])

    model = Model()
    _inject(_config(), model.infer)
    results = model.infer(_three_requests())
    np.testing.assert_array_equal(results[0]["a"], [[10], [10]])

    model2 = Model()
    _inject(_config(), model2)
    results = model2(_three_requests())
    np.testing.assert_array_equal(results[2]["a"], [[10]])


def test_sample_dict_output():
    request = Request({"b": np.array([[7, 5], [8, 6]]), "a": np.array([[1], [1]])})

    @sample
    def fn(**inputs):
        assert set(inputs) == {"a", "b"}
        return {"a": inputs["a"] * 2, "b": inputs["b"] * 3}

    results = fn([request])
    assert isinstance(results, list) and len(results) == 1
    np.testing.assert_array_equal(results[0]["a"], request["a"] * 2)
    np.testing.assert_array_equal(results[0]["b"], request["b"] * 3)


def test_sample_list_output_and_named_params():
    request = Request({"b": np.array([[7, 5]]), "a": np.array([[1]])})

    @sample
    def fn(a, b):
        return [a * 2, b * 3]

    _inject(_config(), fn)
    (result,) = fn([request])
    assert list(result) == ["a", "b"]
    np.testing.assert_array_equal(result["b"], [[21, 15]])


def test_sample_unsupported_output():
    @sample
    def fn(**inputs):
        return 5

    with pytest.raises(PyTritonValidationError, match="Unsupported output type"):
        fn([Request({"a": np.array([1])})])


def test_sample_async_and_generator():
    @sample
    async def afn(a):
        return {"out": a + 1}

    assert inspect.iscoroutinefunction(afn)
    (result,) = _run(afn([Request({"a": np.array([1, 2])})]))
    np.testing.assert_array_equal(result["out"], [2, 3])

    @sample
    def gen(a):
        yield {"out": a}
        yield {"out": a * 2}

    parts = list(gen([Request({"a": np.array([3])})]))
    assert [p[0]["out"].tolist() for p in parts] == [[3], [6]]


def test_batch_mixes_server_requests_and_plain_dicts():
    """A server's Request is read through its dict of arrays; plain mappings as before; the keys check is a set's."""
    seen = {}

    @batch
    def fn(**inputs):
        seen.update(inputs)
        return {"out": inputs["x"] * 2, "n": inputs["n"]}

    rows = [
        Request({"x": np.array([[1.0]], np.float32), "n": np.array([[1]], np.int64)}),
        {"n": np.array([[2], [3]], np.int64), "x": np.array([[2.0], [3.0]], np.float32)},
        Request({"n": np.array([[4]], np.int64), "x": np.array([[4.0]], np.float32)}),
    ]
    results = fn(rows)
    assert list(seen) == ["x", "n"]  # (the first request's order)
    assert seen["x"].dtype == np.float32 and seen["n"].dtype == np.int64
    assert [r["out"].tolist() for r in results] == [[[2.0]], [[4.0], [6.0]], [[8.0]]]
    assert [r["n"].tolist() for r in results] == [[[1]], [[2], [3]], [[4]]]
    assert all(r["out"].base is not None for r in results)  # (views of the one output)
    with pytest.raises(PyTritonValidationError, match="Cannot batch requests with different set of inputs keys"):
        fn([rows[0], {"x": np.array([[1.0]], np.float32)}])
    with pytest.raises(PyTritonValidationError, match="Cannot batch requests with different set of inputs keys"):
        fn([{"x": np.array([[1.0]], np.float32)}, Request({"x": np.array([[1.0]]), "n": np.array([[1]])})])


def test_batch_sizes_of_rows_that_are_not_arrays_or_have_no_batch_axis():
    @batch
    def fn(**inputs):
        return {"out": np.asarray(inputs["x"])}

    results = fn([{"x": [[1], [2]]}, Request({"x": np.array([[3]])})])  # (a list: its shape's first axis)
    assert [r["out"].tolist() for r in results] == [[[1], [2]], [[3]]]
    with pytest.raises(PyTritonValidationError, match="no batch axis"):  # (0-d: one request is not concatenated)
        fn([Request({"x": np.array(1)})])
    with pytest.raises(ValueError, match="same number of dimensions"):  # (numpy says so, as before)
        fn([Request({"x": np.array([[1]])}), {"x": np.array(2)}])

