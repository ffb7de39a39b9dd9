"""Unit tests of pytriton.decorators (PyTriton 0.7 compatible inference callable decorators); no server needed."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import wrapt

from pytriton.decorators import (
    TRITON_CONTEXT_FIELD_NAME,
    ConstantPadder,
    InferenceRequest,
    InferenceRequests,
    InferenceResult,
    InferenceResults,
    InputNames,
    ModelConfigDict,
    PyTritonRuntimeError,
    TritonContext,
    batch,
    convert_output,
    fill_optionals,
    first_value,
    get_inference_request_batch_size,
    get_model_config,
    get_triton_context,
    group_by_keys,
    group_by_values,
    pad_batch,
    sample,
    triton_context,
)
from pytriton.exceptions import PyTritonBadParameterError, PyTritonError, PyTritonValidationError
from pytriton.model_config.common import DynamicBatcher
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.types import Request

# ------------------------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------------------------------
# public surface
# ------------------------------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------------------------------
# ModelConfigDict / TritonContext / get_* helpers
# ------------------------------------------------------------------------------------------------------------------


class _CallableClass:
    def __call__(self, requests):
        return requests

    def method(self, requests):
        return requests


def test_model_config_dict_functions_and_objects():
    def fn():
        pass

    def fn2():
        pass

    inst, inst2 = _CallableClass(), _CallableClass()
    configs = ModelConfigDict()
    cfg_fn, cfg_fn2, cfg_inst, cfg_inst2 = (_config() for _ in range(4))
    configs[fn] = cfg_fn
    configs[fn2] = cfg_fn2
    configs[inst] = cfg_inst
    configs[inst2] = cfg_inst2

    assert configs[fn] is cfg_fn and configs[fn2] is cfg_fn2
    assert configs[inst] is cfg_inst and configs[inst2] is cfg_inst2
    assert configs[inst.__call__] is cfg_inst  # bound __call__ identifies its object
    assert len(configs) == 4
    assert set(configs.keys()) == {fn, fn2, inst, inst2}
    assert set(iter(configs)) == {fn, fn2, inst, inst2}
    assert fn in configs and _CallableClass() not in configs

    assert "ModelConfigDict(" in repr(configs)
    del configs[fn]
    assert len(configs) == 3 and fn not in configs and set(configs) == {fn2, inst, inst2}
    with pytest.raises(KeyError):
        configs[fn]


def test_model_config_dict_bound_methods_of_same_object_are_equal():
    inst, inst2 = _CallableClass(), _CallableClass()
    configs = ModelConfigDict()
    cfg, cfg2 = _config(), _config()
    configs[inst.method] = cfg
    configs[inst2.method] = cfg2
    assert inst.method is not inst.method  # a new bound method object on every access
    assert configs[inst.method] is cfg
    assert configs[inst2.method] is cfg2
    assert len(configs) == 2
    configs[inst.method] = cfg2  # re-setting the same callable does not add a key
    assert len(configs) == 2 and len(list(configs)) == 2
    assert configs[inst.method] is cfg2


def test_model_config_dict_objects_with_equal_repr_are_distinct():
    class Model:
        def __repr__(self):
            return "Model()"

        def __call__(self, requests):
            return requests

    m1, m2 = Model(), Model()
    configs = ModelConfigDict()
    configs[m1] = c1 = _config()
    configs[m2] = c2 = _config()
    assert configs[m1] is c1 and configs[m2] is c2


def test_model_config_dict_sees_through_wrapt_wrappers():
    def raw(requests):
        return requests

    decorated = batch(raw)
    configs = ModelConfigDict()
    configs[decorated] = cfg = _config()
    assert configs[raw] is cfg

    class Holder:
        @batch
        @first_value("a")
        def infer(self, **inputs):
            return inputs

    holder = Holder()
    configs[holder.infer] = cfg2 = _config()
    assert configs[holder.infer] is cfg2
    assert configs[holder.infer.__wrapped__] is cfg2  # the inner bound wrapper


def test_get_triton_context_and_model_config_for_function():
    def fn(requests):
        return requests

    cfg = _config()
    context = _inject(cfg, fn)
    assert get_triton_context(fn, None) is context
    assert get_model_config(fn, None) is cfg


def test_get_triton_context_missing_raises():
    def fn(requests):
        return requests

    with pytest.raises(PyTritonValidationError, match="must bound with triton to get  __triton_context__"):
        get_triton_context(fn, None)
    with pytest.raises(PyTritonValidationError):
        get_model_config(fn, None)


def test_get_model_config_not_registered_raises_key_error():
    def fn(requests):
        return requests

    fn.__triton_context__ = TritonContext()
    with pytest.raises(KeyError):
        get_model_config(fn, None)
    with pytest.raises(PyTritonValidationError, match="No model config"):
        get_model_config(fn, None)


# ------------------------------------------------------------------------------------------------------------------
# convert_output
# ------------------------------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------------------------------
# @batch
# ------------------------------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------------------------------
# @sample
# ------------------------------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------------------------------
# @group_by_keys
# ------------------------------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------------------------------
# @group_by_values and ConstantPadder
# ------------------------------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------------------------------
# @fill_optionals
# ------------------------------------------------------------------------------------------------------------------


def _optionals_config(max_batch_size=8):
    return _config(
        inputs=(("x", "FP32", (2,)), ("temperature", "FP32", (1,)), ("text", "BYTES", (-1,)), ("k", "INT32", (-1, 2))),
        outputs=(("y", "FP32", (2,)),),
        max_batch_size=max_batch_size,
        optional=("temperature", "text", "k"),
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


# ------------------------------------------------------------------------------------------------------------------
# @first_value
# ------------------------------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------------------------------
# @pad_batch
# ------------------------------------------------------------------------------------------------------------------

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


# ------------------------------------------------------------------------------------------------------------------
# @triton_context
# ------------------------------------------------------------------------------------------------------------------


def test_triton_context_function():
    @triton_context
    def fn(requests, **kwargs):
        return kwargs[TRITON_CONTEXT_FIELD_NAME]

    cfg = _config()
    context = _inject(cfg, fn)
    got = fn([])
    assert got is context
    assert got.model_configs[fn] is cfg


def test_triton_context_bound_method_and_callable_object():
    class Model:
        @triton_context
        def infer(self, requests, triton_context):
            return triton_context.model_configs[self.infer]

        @triton_context
        def __call__(self, requests, triton_context):
            return triton_context.model_configs[self]

    model = Model()
    cfg = _config()
    _inject(cfg, model.infer)
    assert model.__triton_context__.model_configs[model.infer] is cfg
    assert model.infer([]) is cfg

    callable_model = Model()
    cfg2 = _config()
    _inject(cfg2, callable_model)
    assert callable_model([]) is cfg2


def test_triton_context_not_bound():
    @triton_context
    def fn(requests, **kwargs):
        return kwargs

    with pytest.raises(PyTritonValidationError, match="__triton_context__"):
        fn([])


# ------------------------------------------------------------------------------------------------------------------
# stacking, as in PyTriton's docs and examples
# ------------------------------------------------------------------------------------------------------------------


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
