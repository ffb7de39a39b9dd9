"""Python-based backends, as Triton serves them (`--backend-directory DIR`): a repository model whose config.pbtxt
names a backend other than python runs DIR/<backend>/model.py, completed by its auto_complete_config, with
`args["model_repository"]` its own folder and `pb_utils.get_model_dir()` its version folder (where the backend reads
its files); the config shows the backend's name. A backend that is not there is refused, naming the option."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

import pytriton.tritonserver as tritonserver
from tests._support.paths import REPO
from tests._support.serving import serve

ROOT = REPO / "tests" / "repositories" / "python_based"
MODELS = ROOT / "models"
BACKENDS = ROOT / "backends"


def infer(client, model):
    x = httpclient.InferInput("X", [3], "FP32")
    x.set_data_from_numpy(np.array([1, 2, 3], dtype=np.float32))
    result = client.infer(model, [x])
    return result.as_numpy("Y").tolist(), result.get_response()["parameters"]["where"]


def test_models_of_a_python_based_backend_are_served():
    with serve("--model-repository", str(MODELS), "--backend-directory", str(BACKENDS), "--model-control-mode",
               "explicit", "--load-model", "double", "--load-model", "triple") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert infer(client, "double") == ([2, 4, 6], f"double 1 {MODELS / 'double'}")
        assert infer(client, "triple") == ([3, 6, 9], f"triple 1 {MODELS / 'triple'}")
        config = client.get_model_config("double")
        assert config["backend"] == "scale" and [i["name"] for i in config["input"]] == ["X"]
        with pytest.raises(InferenceServerException, match="no_such_backend") as caught:
            client.load_model("unknown_backend")
        assert "--backend-directory" in str(caught.value)


def test_without_the_backend_directory_the_backend_is_refused(tmp_path):
    (tmp_path / "double").symlink_to(MODELS / "double")
    done = subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", "--model-repository", str(tmp_path),
                           "--backend-directory", str(tmp_path / "none"), "--http-port", "0", "--grpc-port", "0",
                           "--metrics-port", "0"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "got 'scale'" in done.stderr, done.stderr


def test_in_process_server_takes_the_backend_directory(tmp_path):
    (tmp_path / "triple").symlink_to(MODELS / "triple")
    server = tritonserver.Server(model_repository=str(tmp_path), backend_directory=str(BACKENDS),
                                 exit_timeout=5).start(wait_until_ready=True)
    try:
        model = server.model("triple")
        assert json.loads(json.dumps(model.config()))["backend"] == "scale"
        responses = list(model.infer(inputs={"X": np.array([1, 2], dtype=np.float32)}))
        assert np.from_dlpack(responses[0].outputs["Y"]).tolist() == [3, 6]
    finally:
        server.stop()
