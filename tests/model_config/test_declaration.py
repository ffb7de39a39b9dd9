"""@triton_model: what it attaches and where, its eager errors, and how `pytriton serve` merges it with its flags."""

from __future__ import annotations

import json

import click
import numpy as np
import pytest

from pytriton.backends.target import CallableTarget
from pytriton.cli.model import ModelFlags, TargetDescription, build_model_config
from pytriton.config import gpus
from pytriton.decorators import batch
from pytriton.exceptions import PyTritonValidationError
from pytriton.model_config import (
    DynamicBatcher,
    ModelConfig,
    ModelDeclaration,
    Tensor,
    TensorSpec,
    declaration_of,
    triton_model,
)
from tests._fake_nvml import fake_gpus, install_fake_pynvml

IN = [Tensor(name="A", dtype=np.int32, shape=(-1,))]
OUT = [Tensor(name="B", dtype=np.float32, shape=(2,))]


def test_a_function_is_returned_unchanged_and_still_callable():
    def fn(requests):
        return [{"B": r["A"]} for r in requests]

    decorated = triton_model(inputs=IN, outputs=OUT, name="m", instances=3, device="gpu")(fn)
    assert decorated is fn
    assert fn([{"A": 1}]) == [{"B": 1}]
    declared = declaration_of(fn)
    assert declared == ModelDeclaration(name="m", inputs=[TensorSpec("A", "INT32", (-1,))],
                                        outputs=[TensorSpec("B", "FP32", (2,))], instances=3, device="gpu")


@pytest.mark.parametrize("order", ["declaration-outside", "batch-outside"])
def test_batch_decorated_functions_carry_the_declaration_in_either_order(order):
    def fn(A):
        return {"B": A.astype(np.float32)}

    declare = triton_model(inputs=IN, outputs=OUT, config=ModelConfig(max_batch_size=8))
    decorated = declare(batch(fn)) if order == "declaration-outside" else batch(declare(fn))
    declared = declaration_of(decorated)
    assert declared is not None and declared.max_batch_size == 8 and declared.batcher == DynamicBatcher()
    result = decorated([{"A": np.array([[1, 2]], dtype=np.int32)}])  # still a working @batch callable
    np.testing.assert_array_equal(result[0]["B"], np.array([[1.0, 2.0]], dtype=np.float32))


def test_a_class_and_a_method_carry_it():
    @triton_model(outputs=OUT)
    class Model:
        @triton_model(inputs=IN, outputs=OUT, name="by_method")
        def infer(self, requests):
            return requests

    assert declaration_of(Model).name is None and declaration_of(Model).inputs is None
    assert declaration_of(Model.infer).name == "by_method"
    assert declaration_of(Model().infer).name == "by_method"


def test_the_model_config_is_read_as_bind_reads_it():
    config = ModelConfig(batching=False, max_batch_size=16, decoupled=True, response_cache=True)
    declared = declaration_of(triton_model(inputs=IN, outputs=OUT, config=config)(lambda r: r))
    assert (declared.max_batch_size, declared.batcher, declared.decoupled, declared.response_cache) == \
        (0, None, True, True)
    undeclared = declaration_of(triton_model(outputs=OUT)(lambda r: r))
    assert (undeclared.max_batch_size, undeclared.decoupled, undeclared.inputs) == (None, None, None)


def test_it_survives_json_as_the_describe_process_sends_it():
    batcher = DynamicBatcher(max_queue_delay_microseconds=100, preferred_batch_size=[2, 4])
    declared = declaration_of(triton_model(inputs=[], outputs=OUT, name="x", strict=True,
                                           config=ModelConfig(max_batch_size=0, batching=False, batcher=batcher))
                              (lambda r: r))
    assert ModelDeclaration.from_dict(declared.to_dict()) == declared
    with_batcher = ModelDeclaration(outputs=[TensorSpec("B", "FP32", (2,))], max_batch_size=4, batcher=batcher)
    assert ModelDeclaration.from_dict(with_batcher.to_dict()) == with_batcher


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"outputs": []}, "@triton_model: at least one output is required"),
        ({"inputs": [Tensor(name="A", dtype=np.int32, shape=(1,))] * 2, "outputs": OUT}, "duplicate input names ['A']"),
        ({"outputs": [Tensor(name="B", dtype=np.complex64, shape=(1,))]}, "output 'B'"),
        ({"outputs": [Tensor(name="B", dtype=np.int32, shape=(-2,))]}, "dimensions must be >= -1"),
        ({"outputs": [Tensor(name="B", dtype=np.int32, shape=(1,), optional=True)]}, "outputs cannot be optional"),
        ({"outputs": OUT, "device": "tpu"}, "device must be 'cpu' or 'gpu', got 'tpu'"),
        ({"outputs": OUT, "instances": 0}, "instances must be an integer >= 1, got 0"),
        ({"outputs": OUT, "name": "a/b"},
         "@triton_model(name='a/b'): invalid model name 'a/b', model name must not contain path traversal"),
        ({"outputs": OUT, "name": "a", "model_name": "b"}, "name='a' and model_name='b' disagree"),
        ({"outputs": Tensor(name="B", dtype=np.int32, shape=(1,))}, "outputs must be a list of Tensor(...)"),
        ({"outputs": OUT, "config": {"max_batch_size": 4}}, "config must be a pytriton.model_config.ModelConfig"),
        ({"inputs": [], "outputs": OUT, "config": ModelConfig(max_batch_size=4)},
         "a model without inputs cannot batch"),
    ],
)
def test_mistakes_are_refused_when_the_module_is_imported(kwargs, message):
    with pytest.raises(PyTritonValidationError) as info:
        triton_model(**kwargs)
    assert message in str(info.value)


def test_model_name_is_the_same_as_name():
    assert declaration_of(triton_model(outputs=OUT, model_name="as_bind")(lambda r: r)).name == "as_bind"


TARGET = CallableTarget("mymod", "infer_fn")
DECLARED = TargetDescription(ModelDeclaration(
    name="declared", inputs=[TensorSpec("A", "INT32", (-1,))], outputs=[TensorSpec("B", "FP32", (2,))],
    max_batch_size=8, batcher=DynamicBatcher(max_queue_delay_microseconds=50), decoupled=True, instances=2,
    device="gpu", strict=False))


@pytest.fixture
def two_gpus(monkeypatch):
    """GPU discovery faked to report two GPUs (the declaration says device="gpu")."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", json.dumps(fake_gpus(2)))
    install_fake_pynvml(monkeypatch)
    yield
    gpus.physical_gpus.cache_clear()


def test_the_declaration_alone_makes_the_model(two_gpus):
    config = build_model_config(TARGET, DECLARED, ModelFlags())
    assert (config.model_name, config.max_batch_size, config.instance_count, config.decoupled, config.strict,
            config.device, config.gpus) == ("declared", 8, 2, True, False, "gpu", [0, 1])
    assert config.batcher == DynamicBatcher(max_queue_delay_microseconds=50)
    assert [s.name for s in config.inputs] == ["A"] and [s.name for s in config.outputs] == ["B"]


def test_each_flag_overrides_its_field_only(two_gpus):
    flags = ModelFlags(model_name="cli", inputs=[TensorSpec("X", "FP32", (3,))], instances=1, decoupled=False,
                       max_queue_delay_us=7, preferred_batch_size=(4,), gpus="1")
    config = build_model_config(TARGET, DECLARED, flags)
    assert (config.model_name, config.instance_count, config.decoupled, config.max_batch_size, config.gpus) == (
        "cli", 1, False, 8, [1])
    assert [s.name for s in config.inputs] == ["X"] and [s.name for s in config.outputs] == ["B"]
    assert config.batcher == DynamicBatcher(max_queue_delay_microseconds=7, preferred_batch_size=[4])
    assert DECLARED.declaration.batcher == DynamicBatcher(max_queue_delay_microseconds=50)  # not changed in place
    unbatched = build_model_config(TARGET, DECLARED, ModelFlags(max_batch_size=0))
    assert (unbatched.max_batch_size, unbatched.batcher) == (0, None)
    no_batcher = build_model_config(TARGET, DECLARED, ModelFlags(dynamic_batching=False))
    assert (no_batcher.max_batch_size, no_batcher.batcher) == (8, None)


def test_without_declaration_the_flags_and_defaults_make_it():
    flags = ModelFlags(inputs=[TensorSpec("X", "FP32", (3,))], outputs=[TensorSpec("Y", "FP32", (3,))])
    config = build_model_config(TARGET, TargetDescription(None), flags)
    assert (config.model_name, config.max_batch_size, config.batcher, config.instance_count, config.decoupled,
            config.strict, config.device) == ("infer_fn", 0, None, 1, False, True, None)
    dynamic = build_model_config(TARGET, TargetDescription(None), ModelFlags(
        inputs=flags.inputs, outputs=flags.outputs, max_batch_size=4, dynamic_batching=True))
    assert dynamic.batcher == DynamicBatcher()
    with pytest.raises(click.UsageError, match="--dynamic-batching needs --max-batch-size > 0"):
        build_model_config(TARGET, TargetDescription(None), ModelFlags(
            inputs=flags.inputs, outputs=flags.outputs, dynamic_batching=True))
