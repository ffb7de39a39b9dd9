"""Triton's model loading API in Python-backend models (`pb_utils.load_model`, `unload_model`, `is_model_ready`),
served by `pytriton serve --model-repository tests/repositories/model_loading` and driven through tritonclient:
`loader` makes the calls from execute() as a request's CALL says and answers what it saw; `init_loader` loads its
callee from initialize() while the server loads it; `cycle_a` and `cycle_b` load each other from initialize().
Outside model control mode explicit every call is refused in Triton's words; uploads need --allow-model-upload."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.paths import REPO
from tests._support.serving import serve

REPOSITORY = REPO / "tests" / "repositories" / "model_loading"
TARGET_MODEL = (REPOSITORY / "target" / "2" / "model.py").read_bytes()
# How Triton words a refusal the server sends (naming the calling instance), after "Failed to <call>: ".
REFUSAL = "Failed to process the request for model 'loader_0', message: "
IO = {"input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1]}],  # target's, for a config override
      "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}]}


def call(client, **what) -> str:
    """Have `loader` make one call of the model loading API; what it answers ("ok", "True", "False", or the
    exception it caught)."""
    tensor = grpcclient.InferInput("CALL", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([json.dumps(what).encode()], dtype=np.object_))
    result = client.infer("loader", [tensor]).as_numpy("RESULT")[0]
    return result.decode()


def identity(client, model: str, version: str = "") -> list[float]:
    tensor = grpcclient.InferInput("X", [2], "FP32")
    tensor.set_data_from_numpy(np.array([1.5, -2.0], np.float32))
    return client.infer(model, [tensor], model_version=version).as_numpy("Y").tolist()


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPOSITORY), "--model-control-mode", "explicit", "--load-model", "loader",
               "--allow-model-upload") as server:
        yield server


@pytest.fixture
def client(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    yield client
    for name in ("target", "uploaded", "init_loader"):
        client.unload_model(name)
    client.close()


def test_load_check_and_unload_from_execute(client):
    assert call(client, call="ready", model="target") == "False"
    assert call(client, call="load", model="target") == "ok"
    assert call(client, call="ready", model="target") == "True"
    assert call(client, call="ready", model="target", version="2") == "True"
    assert client.is_model_ready("target", "3")
    assert identity(client, "target") == [1.5, -2.0]
    assert call(client, call="unload", model="target") == "ok"
    assert call(client, call="ready", model="target") == "False"
    assert not client.is_model_ready("target")


def test_load_with_a_config_override(client):
    assert call(client, call="load", model="target") == "ok"
    wrong = '"parameters": {"config": {{"backend":"python"}}}'  # (Triton's QA test sends this malformed one)
    answer = call(client, call="load", model="target", config=wrong)
    assert answer.startswith("TritonModelException: Failed to load model: " + REFUSAL), answer
    assert call(client, call="ready", model="target", version="2") == "True"  # unchanged by the failed load
    config = json.dumps({"backend": "python", "version_policy": {"specific": {"versions": [2]}}, **IO})
    assert call(client, call="load", model="target", config=config) == "ok"
    assert call(client, call="ready", model="target", version="2") == "True"
    assert call(client, call="ready", model="target", version="3") == "False"


def test_load_with_files(client):
    files = {"file:1/model.py": base64.b64encode(TARGET_MODEL).decode()}
    answer = call(client, call="load", model="uploaded", files=files)
    assert answer == ("TritonModelException: Failed to load model: " + REFUSAL + "failed to load 'uploaded': a model "
                      "given as files ('file:' parameters) needs its configuration in the 'config' parameter"), answer
    config = json.dumps({"backend": "python", **IO})
    assert call(client, call="load", model="uploaded", config=config, files=files) == "ok"
    assert call(client, call="ready", model="uploaded", version="1") == "True"
    assert identity(client, "uploaded") == [1.5, -2.0]


def test_bad_arguments_are_refused_in_tritons_words(client):
    assert call(client, call="ready", model="target", version="x") == (
        "TritonModelException: Failed to check model readiness: " + REFUSAL + "failed to get model version from "
        "specified version string 'x' (details: stol), version should be an integral value > 0")
    assert call(client, call="ready", model="target", version="-1") == (
        "TritonModelException: Failed to check model readiness: " + REFUSAL + "failed to get model version from "
        "specified version string '-1', version should be an integral value > 0")
    assert call(client, call="load", model="target", files=["not", "a", "dict"]) == (
        "TritonModelException: failed to load model 'target', files should be a dictionary of file paths and file "
        "contents")
    answer = call(client, call="load", model="../escape")
    assert answer.startswith("TritonModelException: Failed to load model: " + REFUSAL), answer
    assert call(client, call="load", model="absent") == (
        "TritonModelException: Failed to load model: " + REFUSAL + "failed to load 'absent', failed to poll from "
        "model repository")


def test_a_model_loading_from_initialize_while_the_server_loads_it(client):
    client.load_model("init_loader")  # its initialize() loads target: no deadlock with the load under way
    assert client.is_model_ready("target")
    assert identity(client, "init_loader") == [1.5, -2.0]


def test_models_loading_each_other_from_initialize_are_refused_not_hung(client):
    with pytest.raises(InferenceServerException, match="would wait for itself"):
        client.load_model("cycle_a")
    assert not client.is_model_ready("cycle_a")
    assert client.is_server_live()


def test_a_model_unloading_or_loading_itself(client):
    answer = call(client, call="load", model="loader")
    assert answer == ("TritonModelException: Failed to load model: " + REFUSAL + "failed to load 'loader': a model "
                      "cannot load itself (it would wait for itself)"), answer
    assert call(client, call="unload", model="loader") == "ok"  # answered once begun: it waits for this execution
    client.load_model("loader")  # (the next tests need it back; the unload above finished first)
    assert client.is_model_ready("loader")


def test_refused_outside_mode_explicit(tmp_path):
    for name in ("loader", "target"):  # (mode none loads every model of its repository at start)
        shutil.copytree(REPOSITORY / name, tmp_path / name)
    with serve("--model-repository", str(tmp_path)) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            for what in ({"call": "load", "model": "target"}, {"call": "unload", "model": "target"}):
                verb = what["call"]
                assert call(client, **what) == (
                    f"TritonModelException: Failed to {verb} model: {REFUSAL}explicit model load / unload is not "
                    "allowed if polling is enabled")
            assert call(client, call="ready", model="target") == "True"
        finally:
            client.close()


def test_uploads_refused_without_allow_model_upload():
    with serve("--model-repository", str(REPOSITORY), "--model-control-mode", "explicit",
               "--load-model", "loader") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            files = {"file:1/model.py": base64.b64encode(TARGET_MODEL).decode()}
            answer = call(client, call="load", model="uploaded", config='{"backend":"python"}', files=files)
            assert answer.startswith("TritonModelException: Failed to load model: " + REFUSAL + "failed to load "
                                     "'uploaded': loading a model from files ('file:' parameters) is not allowed"), answer
        finally:
            client.close()


def test_refused_while_the_server_starts():
    """As Triton: the API is for a running server; a model that calls it from initialize() at start fails to load."""
    ports = [arg for service in ("http", "grpc", "metrics")
             for arg in (f"--{service}-port", "0", f"--{service}-address", "127.0.0.1")]
    done = subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", "--model-repository", str(REPOSITORY),
                           "--model-control-mode", "explicit", "--load-model", "init_loader", *ports],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert ("TritonModelException: Failed to check model readiness: Failed to process the request for model "
            "'init_loader_0', message: Server not ready") in done.stderr + done.stdout
