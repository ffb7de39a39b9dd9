"""Tracing from the PyTriton API: `TritonConfig(trace_config=[...])` for the server, `bind(trace_config=[...])` for
one model's own settings; bad entries raise naming the setting."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from pytriton.config.trace import parse_trace_config
from pytriton.core.settings import TraceSettings
from pytriton.exceptions import PyTritonValidationError
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig
from tests._support.ports import FREE_PORTS
from tests.triton import models

F32 = np.float32


def _bind(server: Triton, name: str, trace_config: list[str] | None = None) -> None:
    server.bind(name, models.times(2), inputs=[Tensor(name="values", shape=(1,), dtype=F32)],
                outputs=[Tensor(name="result", shape=(1,), dtype=F32)], config=ModelConfig(batching=False),
                trace_config=trace_config)


def test_trace_config_from_python_and_per_model(tmp_path):
    path = tmp_path / "trace.json"
    config = TritonConfig(trace_config=[f"triton,file={path}", "rate=1"], **FREE_PORTS)  # level OFF globally
    with Triton(config=config) as server:
        _bind(server, "traced", trace_config=["level=TIMESTAMPS"])
        _bind(server, "untraced")
        server.run()
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.ports['grpc']}")
        for name in ("traced", "untraced", "traced"):
            tensor = grpcclient.InferInput("values", [1], "FP32")
            tensor.set_data_from_numpy(np.ones(1, dtype=F32))
            assert client.infer(name, [tensor]).as_numpy("result")[0] == 2
        client.close()
    entries = json.loads(path.read_text())
    heads = [e for e in entries if "model_name" in e]
    assert [h["model_name"] for h in heads] == ["traced", "traced"]
    for entry in entries:
        if "timestamps" in entry:
            names = [t["name"] for t in entry["timestamps"]]
            assert names[2:10] == ["REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
                                   "COMPUTE_OUTPUT_START", "COMPUTE_END", "INFER_RESPONSE_COMPLETE", "REQUEST_END"]
            ns = [t["ns"] for t in entry["timestamps"]]
            assert ns == sorted(ns)  # the compute timestamps of a thread of this process fit in between


def test_bad_trace_config_raises_naming_the_setting():
    with pytest.raises(PyTritonValidationError, match="TritonConfig.trace_config: --trace-config rate: expected an "
                                                      "integer, got 'fast'"):
        TritonConfig(trace_config=["rate=fast"])
    with pytest.raises(PyTritonValidationError, match="bind\\(trace_config=...\\) of model 'm': trace setting "
                                                      "'triton,file=/tmp/x' is not per model"):
        _bind(Triton(), "m", trace_config=["triton,file=/tmp/x"])


def test_trace_config_from_the_environment(monkeypatch):
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_TRACE_CONFIG", "triton,file=/t.json,level=TIMESTAMPS,rate=1")
    config = TritonConfig.from_env()
    assert TraceSettings.from_config(parse_trace_config(config.trace_config)).get() == {
        "trace_level": ["TIMESTAMPS"], "trace_rate": "1", "trace_count": "-1", "log_frequency": "0",
        "trace_file": "/t.json", "trace_mode": "triton"}
