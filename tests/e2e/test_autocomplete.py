"""Auto-complete of repository models (`TritonPythonModel.auto_complete_config`, Triton's default): models without a
config.pbtxt or with a partial one are served as their auto_complete_config completes them (batching, non-batching,
decoupled), which the model configuration and metadata endpoints show and the instances get; failing
auto_complete_configs refused by name; --disable-auto-complete-config / --strict-model-config=true as in Triton."""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve

REPOS = REPO / "tests" / "repositories"


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPOS / "autocomplete")) as s:
        yield s


def config_of(client, protocol: str, model: str) -> dict:
    config = client.get_model_config(model, as_json=True) if protocol == "grpc" else client.get_model_config(model)
    return config["config"] if protocol == "grpc" else config


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", *args, "--grpc-port", "0", "--http-port",
                           "0", "--metrics-port", "0", "--grpc-address", "127.0.0.1", "--http-address", "127.0.0.1",
                           "--metrics-address", "127.0.0.1"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_model_without_config_pbtxt_is_completed_and_batches(server, protocol):
    client = client_for(server, protocol)
    config = config_of(client, protocol, "ac_batching")
    assert config["max_batch_size"] == 16
    assert "dynamic_batching" in config
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["input"]] == [
        ("INPUT0", "TYPE_FP32", ["4"] if protocol == "grpc" else [4]),
        ("INPUT1", "TYPE_FP32", ["4"] if protocol == "grpc" else [4])]
    metadata = client.get_model_metadata("ac_batching", as_json=True) if protocol == "grpc" else \
        client.get_model_metadata("ac_batching")
    assert [(t["name"], [int(d) for d in t["shape"]]) for t in metadata["outputs"]] == [("SUM", [-1, 4]),
                                                                                      ("DIFF", [-1, 4])]
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), dtype=np.float32)
    inputs = []
    for name, array in (("INPUT0", a), ("INPUT1", b)):
        tensor = CLIENTS[protocol].InferInput(name, [2, 4], "FP32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = client.infer("ac_batching", inputs)
    np.testing.assert_array_equal(result.as_numpy("SUM"), a + b)
    np.testing.assert_array_equal(result.as_numpy("DIFF"), a - b)
    response = result.get_response()
    # initialize() read max_batch_size from args["model_config"]: the instances get the completed configuration
    if protocol == "grpc":
        assert response.parameters["max_batch_size"].int64_param == 16
    else:
        assert response["parameters"]["max_batch_size"] == 16


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_partial_config_is_completed_without_batching(server, protocol):
    client = client_for(server, protocol)
    config = config_of(client, protocol, "ac_partial")
    assert config.get("max_batch_size", 0) == 0 and "dynamic_batching" not in config  # gRPC JSON omits zeros
    assert [(t["name"], t["data_type"]) for t in config["input"]] == [("TEXT", "TYPE_STRING")]
    assert [(t["name"], t["data_type"]) for t in config["output"]] == [("SHOUTED", "TYPE_STRING")]
    assert config["parameters"]["suffix"]["string_value"] == "!"  # what config.pbtxt said is kept
    tensor = CLIENTS[protocol].InferInput("TEXT", [2], "BYTES")
    tensor.set_data_from_numpy(np.array([b"hi", b"there"], dtype=np.object_))
    result = client.infer("ac_partial", [tensor])
    assert result.as_numpy("SHOUTED").tolist() == [b"HI!", b"THERE!"]


def test_decoupled_policy_from_auto_complete_streams(server):
    client = client_for(server, "grpc")
    assert config_of(client, "grpc", "ac_decoupled")["model_transaction_policy"] == {"decoupled": True}
    results: queue.SimpleQueue = queue.SimpleQueue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        tensor = grpcclient.InferInput("COUNT", [1], "INT32")
        tensor.set_data_from_numpy(np.array([3], dtype=np.int32))
        client.async_stream_infer("ac_decoupled", [tensor], enable_empty_final_response=True)
        indexes = []
        while True:
            result, error = results.get(timeout=20)
            assert error is None, error
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
            indexes.append(int(result.as_numpy("INDEX")[0]))
        assert indexes == [0, 1, 2]
    finally:
        client.stop_stream()


def test_failing_auto_complete_configs_are_unavailable_with_their_reason():
    with serve("--model-repository", str(REPOS / "autocomplete_errors"), "--model-control-mode", "explicit",
               "--load-model", "*", "--exit-on-error", "false") as s:
        client = httpclient.InferenceServerClient(s.http_url)
        models = {m["name"]: m for m in client.get_model_repository_index()}
        assert {m["state"] for m in models.values()} == {"UNAVAILABLE"}
        raises = models["ac_raises"]["reason"]
        assert "auto_complete_config of model 'ac_raises'" in raises
        assert "RuntimeError: cannot find the weights to describe ac_raises" in raises
        assert "model 'ac_conflict', tensor 'X': the model expects dims [8] but the model configuration specifies " \
               "dims [4]" in models["ac_conflict"]["reason"]
        assert "auto_complete_config function in model 'ac_bad_return' must return a valid pb.ModelConfig object" \
            in models["ac_bad_return"]["reason"]
        assert not client.is_model_ready("ac_raises")
        assert client.is_server_live()


def test_failing_auto_complete_config_refuses_the_start(tmp_path):
    shutil.copytree(REPOS / "autocomplete_errors" / "ac_raises", tmp_path / "ac_raises")
    result = run_cli("--model-repository", str(tmp_path))
    assert result.returncode != 0
    assert "auto_complete_config of model 'ac_raises'" in result.stderr
    assert "RuntimeError: cannot find the weights to describe ac_raises" in result.stderr
    assert "model.py" in result.stderr  # the traceback points into the model's file
    assert "server ready" not in result.stderr


@pytest.mark.parametrize("flags", [["--strict-model-config", "true"], ["--disable-auto-complete-config"]])
def test_auto_complete_disabled_requires_config_pbtxt(tmp_path, flags):
    shutil.copytree(REPOS / "autocomplete" / "ac_batching", tmp_path / "ac_batching")
    result = run_cli("--model-repository", str(tmp_path), *flags)
    assert result.returncode != 0
    assert (f"Poll failed for model directory 'ac_batching': failed to open text file for read "
            f"{tmp_path / 'ac_batching' / 'config.pbtxt'}: No such file or directory") in result.stderr


def test_auto_complete_disabled_serves_the_partial_config_as_written(tmp_path):
    shutil.copytree(REPOS / "autocomplete" / "ac_partial", tmp_path / "ac_partial")
    result = run_cli("--model-repository", str(tmp_path), "--disable-auto-complete-config")
    assert result.returncode != 0
    assert "field 'input[0].data_type' of model 'ac_partial': tensor 'TEXT' needs a data type" in result.stderr


def test_explicit_load_with_a_config_that_conflicts_fails_and_a_fitting_one_loads():
    with serve("--model-repository", str(REPOS / "autocomplete"), "--model-control-mode", "explicit",
               "--strict-model-config", "false") as s:
        client = grpcclient.InferenceServerClient(s.grpc_url)
        with pytest.raises(InferenceServerException,
                           match="configuration specified max_batch_size 32, but in auto-complete-config function "
                                 "for model 'ac_batching' specified max_batch_size 16"):
            client.load_model("ac_batching", config=json.dumps({"backend": "python", "max_batch_size": 32}))
        client.load_model("ac_batching", config=json.dumps({"backend": "python", "max_batch_size": 8}))
        assert client.get_model_config("ac_batching", as_json=True)["config"]["max_batch_size"] == 16
        assert client.is_model_ready("ac_batching")
