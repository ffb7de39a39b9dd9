"""Readiness while a served model reloads (strict readiness, the default): as in Triton, the new version loads in the
background while the old one serves on, so the server stays ready, the model stays ready and the repository index
shows it READY (a load balancer polling /v2/health/ready must not drop the server at every reload)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from tests._support.serving import serve
from tests._support.waits import wait_for_file

CONFIG = """
name: "held"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

MODEL = """
import os
import time

import triton_python_backend_utils as pb_utils

HERE = os.path.dirname(__file__)


class TritonPythonModel:
    def initialize(self, args):
        if os.path.exists(os.path.join(HERE, "..", "hold")):  # a reload: held until the test opens the gate
            open(os.path.join(HERE, "..", "reloading"), "w").close()
            while not os.path.exists(os.path.join(HERE, "..", "gate")):
                time.sleep(0.02)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
                for r in requests]
"""


def test_server_stays_ready_while_a_served_model_reloads(tmp_path: Path) -> None:
    model = tmp_path / "held"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG)
    (model / "1" / "model.py").write_text(MODEL)
    with serve("--model-repository", str(tmp_path), "--model-control-mode", "explicit", "--load-model", "held") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.is_server_ready()
        (model / "hold").write_text("")
        (model / "1" / "model.py").write_text(MODEL + "\n# changed\n")
        loads: list[object] = []
        loader = threading.Thread(target=lambda: loads.append(
            httpclient.InferenceServerClient(server.http_url, network_timeout=120).load_model("held")))
        loader.start()
        try:
            wait_for_file(model / "reloading", 60.0)
            assert client.is_server_ready()
            assert client.is_model_ready("held")
            assert [(e["name"], e["state"]) for e in client.get_model_repository_index()] == [("held", "READY")]
            x = httpclient.InferInput("X", [2], "FP32")
            x.set_data_from_numpy(np.array([1.0, 2.0], dtype=np.float32))
            np.testing.assert_array_equal(client.infer("held", [x]).as_numpy("Y"), [1.0, 2.0])
        finally:
            (model / "gate").write_text("")
            loader.join(120)
        assert loads == [None]
        assert client.is_server_ready()
        assert [(e["name"], e["state"]) for e in client.get_model_repository_index()] == [("held", "READY")]
