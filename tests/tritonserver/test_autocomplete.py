"""Auto-complete in-process (`Options.strict_model_config`, False by default as in Triton's `tritonserver.Options`):
a model folder holding only `1/model.py` whose `auto_complete_config` declares the tensors loads as `pytriton serve`
loads it, in every model control mode; with strict_model_config=True it is refused as Triton refuses it."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy
import pytest

import tritonserver

AUTOCOMPLETE = str(Path(__file__).resolve().parent.parent / "repositories" / "autocomplete")


def test_strict_model_config_defaults_to_false_as_in_triton():
    assert tritonserver.Options().strict_model_config is False


def _infer_batching(server: tritonserver.Server) -> None:
    model = server.model("ac_batching")
    config = model.config()
    assert config["max_batch_size"] == 16 and "dynamic_batching" in config
    assert [(t["name"], t["data_type"]) for t in config["input"]] == [("INPUT0", "TYPE_FP32"), ("INPUT1", "TYPE_FP32")]
    a = numpy.arange(8, dtype=numpy.float32).reshape(2, 4)
    b = numpy.ones((2, 4), numpy.float32)
    (response,) = list(model.infer(inputs={"INPUT0": a, "INPUT1": b}))
    numpy.testing.assert_array_equal(numpy.from_dlpack(response.outputs["SUM"]), a + b)
    assert response.parameters["max_batch_size"] == 16  # the completed config reached initialize()


def test_model_without_config_pbtxt_loads_at_start():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "has no effect yet" warning
        server = tritonserver.Server(model_repository=AUTOCOMPLETE, strict_model_config=False, exit_timeout=5)
        server.start(wait_until_ready=True, timeout=60)
    try:
        _infer_batching(server)
        assert server.model("ac_partial").config()["input"]  # a partial config.pbtxt completed
    finally:
        server.stop()


def test_model_without_config_pbtxt_loads_in_explicit_mode():
    server = tritonserver.Server(model_repository=AUTOCOMPLETE, exit_timeout=5,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    server.start(wait_until_ready=True, timeout=60)
    try:
        server.load("ac_batching")
        _infer_batching(server)
    finally:
        server.stop()


def test_strict_model_config_true_refuses_a_model_without_config_pbtxt():
    server = tritonserver.Server(model_repository=AUTOCOMPLETE, strict_model_config=True, exit_timeout=5,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    server.start(wait_until_ready=True, timeout=60)
    try:
        with pytest.raises(tritonserver.TritonError, match="ac_batching"):
            server.load("ac_batching")
    finally:
        server.stop()
