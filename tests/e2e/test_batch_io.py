"""`batch_input` / `batch_output` in config.pbtxt, as Triton 2.51 serves them with its Python backend: the model loads,
its requests hold only the client's inputs (no batch input tensor is computed), and its config (`args`) shows both
fields. EXPECTED is what the real tritonserver 2.51 answered to the same request of the same model."""

from __future__ import annotations

import numpy as np
import tritonclient.grpc as grpcclient

from tests._support.paths import REPO
from tests._support.serving import serve

EXPECTED = ('X|[[{"kind": "BATCH_ELEMENT_COUNT", "target_name": ["BEC"], "data_type": "TYPE_INT32", "source_input": '
            '["X"]}], [{"target_name": ["Y"], "kind": "BATCH_SCATTER_WITH_INPUT_SHAPE", "source_input": ["X"]}]]')


def test_a_python_model_sees_its_inputs_only_and_the_fields_in_its_config():
    with serve("--model-repository", str(REPO / "tests" / "repositories" / "batch_io")) as server, \
            grpcclient.InferenceServerClient(server.grpc_url) as client:
        tensor = grpcclient.InferInput("X", [1, 3], "FP32")
        tensor.set_data_from_numpy(np.ones((1, 3), np.float32))
        result = client.infer("bio", [tensor])
        assert result.as_numpy("Y").tolist() == [[2.0, 2.0, 2.0]]
        assert result.as_numpy("NAMES").tolist() == [[EXPECTED.encode()]]
        config = client.get_model_config("bio", as_json=True)["config"]
        assert [entry["target_name"] for entry in config["batch_input"]] == [["BEC"]]
        assert [entry["target_name"] for entry in config["batch_output"]] == [["Y"]]
