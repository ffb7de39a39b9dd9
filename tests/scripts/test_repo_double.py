"""The bench's repository server: the repository repo_double writes is served by `pytriton serve --model-repository`
and answers y = 2x with the shapes serve_double.py's models have."""

from __future__ import annotations

import numpy as np
import tritonclient.grpc as grpcclient
from bench_lib.repo_double import write_repository

from tests._support.serving import serve


def test_the_written_repository_serves_y_equals_2x(tmp_path):
    repo = write_repository(tmp_path / "models", ["double_small", "double_1mib"], "dynamic")
    assert "dynamic_batching" in (repo / "double_small" / "config.pbtxt").read_text()
    with serve("--model-repository", str(repo)) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        config = client.get_model_config("double_1mib", as_json=True)["config"]
        assert config["max_batch_size"] == 64 and config["input"][0]["dims"] == ["262144"]
        x = np.arange(32, dtype=np.float32).reshape(2, 16)
        tensor = grpcclient.InferInput("INPUT", [2, 16], "FP32")
        tensor.set_data_from_numpy(x)
        np.testing.assert_array_equal(client.infer("double_small", [tensor]).as_numpy("OUTPUT"), x * 2)
