"""`Triton(config=TritonConfig(allow_sagemaker=True, allow_vertex_ai=True))`: the endpoints serve the models bound
in Python (the Vertex AI default model is chosen at the first prediction, since bound models are added after the
server starts), on the HTTP address."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest

from pytriton.model_config import Tensor
from pytriton.triton import Triton, TritonConfig
from tests.e2e.platform_http import request
from tests.triton import models


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_bound_model_served_on_sagemaker_and_vertex_ai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIP_PREDICT_ROUTE", "/predict")
    monkeypatch.setenv("AIP_HEALTH_ROUTE", "/health")
    monkeypatch.delenv("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", raising=False)
    sagemaker_port, vertex_port = _free_port(), _free_port()
    config = TritonConfig(http_address="127.0.0.1", http_port=0, grpc_address="127.0.0.1", grpc_port=0,
                          metrics_address="127.0.0.1", metrics_port=0, allow_sagemaker=True,
                          sagemaker_port=sagemaker_port, allow_vertex_ai=True, vertex_ai_port=vertex_port)
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 2], "data": [1.5, 2.5]}]}).encode()
    with Triton(config=config) as triton:
        triton.bind("echo", models.identity, inputs=[Tensor(name="x", shape=(-1,), dtype=np.float32)],
                    outputs=[Tensor(name="identity_x", shape=(-1,), dtype=np.float32)])
        triton.run()
        assert request(sagemaker_port, "GET", "/ping")[::2] == (200, b"")
        for port, path in ((sagemaker_port, "/invocations"), (vertex_port, "/predict")):
            status, _, answer = request(port, "POST", path, body)
            assert status == 200, answer
            reply = json.loads(answer)
            assert (reply["model_name"], reply["outputs"][0]["data"]) == ("echo", [1.5, 2.5])
        assert request(vertex_port, "GET", "/health")[::2] == (200, b"")
