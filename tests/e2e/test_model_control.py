"""Model control of `pytriton serve --model-repository`: explicit load (with a config override), unload and reload,
poll mode picking up a new version and a removed model, the repository index's states and reasons, a request in
flight surviving a reload, and Triton's refusals in modes none and poll; checked with tritonclient gRPC and HTTP."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, client_for
from tests._support.metrics import metric_sum
from tests._support.paths import REPO
from tests._support.serving import serve
from tests._support.waits import wait_until

REPOS = REPO / "tests" / "repositories"
REFUSAL = "explicit model load / unload is not allowed if polling is enabled"

SCALE_CONFIG = """
name: "scale"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

SCALE_MODEL = """
import os
import time

import triton_python_backend_utils as pb_utils

FACTOR = {factor}
RELEASE = {release!r}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x.size and x[0] < 0:  # a request held in flight (during a reload) until the test lets it go
                deadline = time.monotonic() + 60  # (bounded: a broken test must not hold the worker for ever)
                while not os.path.exists(RELEASE) and time.monotonic() < deadline:
                    time.sleep(0.01)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * FACTOR)]))
        return responses
"""


def write_scale(repo: Path, version: int, factor: float) -> None:
    (repo / "scale").mkdir(exist_ok=True)
    (repo / "scale" / "config.pbtxt").write_text(SCALE_CONFIG)
    (repo / "scale" / str(version)).mkdir(exist_ok=True)
    model = SCALE_MODEL.format(factor=factor, release=str(repo / "release"))
    (repo / "scale" / str(version) / "model.py").write_text(model)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository of our own to edit: add_sub and init_fails copied from tests/repositories, and `scale`."""
    shutil.copytree(REPOS / "models" / "add_sub", tmp_path / "add_sub")
    shutil.copytree(REPOS / "broken_init" / "init_fails", tmp_path / "init_fails")
    write_scale(tmp_path, 1, 2.0)
    return tmp_path


def scale(client, protocol: str, x: np.ndarray) -> np.ndarray:
    tensor = CLIENTS[protocol].InferInput("X", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    return client.infer("scale", [tensor]).as_numpy("Y")


def index(client, protocol: str) -> dict[str, dict]:
    if protocol == "grpc":
        models = client.get_model_repository_index(as_json=True).get("models", [])
    else:
        models = client.get_model_repository_index()
    return {m["name"]: m for m in models}


def ready_index(server) -> list[str]:
    """POST /v2/repository/index {"ready": true} (tritonclient has no argument for the filter)."""
    request = urllib.request.Request(f"http://{server.http_url}/v2/repository/index", data=b'{"ready": true}',
                                     method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return [m["name"] for m in json.loads(response.read())]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_explicit_load_override_unload_and_reasons(repo, protocol):
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit", "--load-model", "scale") as server:
        client = client_for(server, protocol)
        models = index(client, protocol)
        assert models["scale"]["state"] == "READY" and models["scale"]["version"] == "1"
        assert models["add_sub"] == {"name": "add_sub"}  # in the repository, never loaded
        assert ready_index(server) == ["scale"]
        assert not client.is_model_ready("add_sub")

        # load with a config override: the scale parameter becomes 3
        config = json.dumps({"name": "add_sub", "backend": "python", "max_batch_size": 8,
                             "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]},
                                       {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]}],
                             "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]},
                                        {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [4]}],
                             "parameters": {"scale": {"string_value": "3"}}})
        client.load_model("add_sub", config=config)
        assert client.is_model_ready("add_sub")
        a = np.ones((1, 4), dtype=np.float32)
        inputs = []
        for name in ("INPUT0", "INPUT1"):
            tensor = CLIENTS[protocol].InferInput(name, [1, 4], "FP32")
            tensor.set_data_from_numpy(a * (2 if name == "INPUT0" else 1))
            inputs.append(tensor)
        np.testing.assert_array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT0"), a * 9)
        served = client_for(server, "grpc").get_model_config("add_sub", as_json=True)["config"]
        assert served["parameters"]["scale"]["string_value"] == "3"
        assert "dynamic_batching" not in served  # the override replaced config.pbtxt as a whole

        # unload: the index says so, requests are refused
        client.unload_model("add_sub", unload_dependents=True)
        assert server.wait_for_log("add_sub finalized")  # finalize() ran on unload
        assert index(client, protocol)["add_sub"] == {"name": "add_sub", "version": "1", "state": "UNAVAILABLE",
                                                      "reason": "unloaded"}
        with pytest.raises(InferenceServerException, match="add_sub"):
            client.infer("add_sub", inputs)

        # a model whose initialize() raises: the load fails with the reason, the index keeps it, the server serves on
        with pytest.raises(InferenceServerException, match="weights file missing for init_fails"):
            client.load_model("init_fails")
        entry = index(client, protocol)["init_fails"]
        assert entry["state"] == "UNAVAILABLE" and "weights file missing for init_fails" in entry["reason"]
        np.testing.assert_array_equal(scale(client, protocol, np.array([1, 2], np.float32)), [2, 4])

        # a model that is in no repository
        with pytest.raises(InferenceServerException, match="failed to load 'nope', failed to poll from model "
                                                            "repository"):
            client.load_model("nope")
        # a bad override is refused naming the model
        with pytest.raises(InferenceServerException, match="failed to load 'scale'"):
            client.load_model("scale", config="{not json")
        assert client.is_server_live()


def test_reload_after_editing_model_py_keeps_a_request_in_flight(repo):
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit", "--load-model", "*",
               "--exit-on-error", "false") as server:
        client = client_for(server, "grpc")
        assert index(client, "grpc")["init_fails"]["state"] == "UNAVAILABLE"  # `*` tried it; the server is up
        np.testing.assert_array_equal(scale(client, "grpc", np.array([1.0], np.float32)), [2.0])
        write_scale(repo, 1, 10.0)

        slow: dict[str, np.ndarray] = {}

        def slow_request() -> None:
            slow["y"] = scale(client_for(server, "grpc"), "grpc", np.array([-1.0], np.float32))

        thread = threading.Thread(target=slow_request)
        loader = threading.Thread(target=client_for(server, "http").load_model, args=("scale",))
        thread.start()
        try:
            # The slow request is executing in the old instance, held there until the reload has swapped in the new.
            wait_until(lambda: metric_sum(server, "pytriton_model_executions_in_flight", 'model="scale"') == 1,
                       "the slow request in flight")
            loader.start()
            assert server.wait_for_log("model 'scale' version 1 ready in place of version 1", 60), server.log
            np.testing.assert_array_equal(scale(client, "grpc", np.array([1.0], np.float32)), [10.0])  # the new one
            assert loader.is_alive()  # the load ends once the old instance has answered what it holds
        finally:
            (repo / "release").touch()
            thread.join(30)
            loader.join(60)
        np.testing.assert_array_equal(slow["y"], [-2.0])  # answered by the old instance, not dropped
        np.testing.assert_array_equal(scale(client, "grpc", np.array([1.0], np.float32)), [10.0])
        assert index(client, "grpc")["scale"]["state"] == "READY"


def test_poll_picks_up_a_new_version_a_change_and_a_removal(repo):
    with serve("--model-repository", str(repo), "--model-control-mode", "poll", "--repository-poll-secs",
               "1", "--exit-on-error", "false") as server:
        client = client_for(server, "http")
        assert index(client, "http")["init_fails"]["state"] == "UNAVAILABLE"
        np.testing.assert_array_equal(scale(client, "http", np.array([1.0], np.float32)), [2.0])
        with pytest.raises(InferenceServerException, match=REFUSAL):
            client.load_model("scale")
        with pytest.raises(InferenceServerException, match=REFUSAL):
            client_for(server, "grpc").unload_model("scale")

        # (each change is waited for by the server's log line saying it is done: the poll picks it up within 1 s)
        write_scale(repo, 2, 5.0)  # a new version: the latest is served
        assert server.wait_for_log("model 'scale' version 2 ready (", 20), server.log
        assert index(client, "http")["scale"]["version"] == "2"
        np.testing.assert_array_equal(scale(client, "http", np.array([1.0], np.float32)), [5.0])

        write_scale(repo, 2, 6.0)  # model.py edited: reloaded
        assert server.wait_for_log("model 'scale' version 2 ready in place of version 2", 20), server.log
        np.testing.assert_array_equal(scale(client, "http", np.array([1.0], np.float32)), [6.0])

        shutil.rmtree(repo / "add_sub")
        assert server.wait_for_log("model 'add_sub' version 1 unloaded", 20), server.log
        assert "add_sub" not in index(client, "http")
        assert not client.is_model_ready("add_sub")


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_mode_none_refuses_load_and_unload(protocol):
    with serve("--model-repository", str(REPOS / "models")) as server:
        client = client_for(server, protocol)
        extensions = client.get_server_metadata(**({"as_json": True} if protocol == "grpc" else {}))["extensions"]
        assert "model_repository" in extensions and "model_repository(unload_dependents)" in extensions
        with pytest.raises(InferenceServerException, match=REFUSAL):
            client.load_model("add_sub")
        with pytest.raises(InferenceServerException, match=REFUSAL):
            client.unload_model("add_sub")
        assert client.is_model_ready("add_sub")
        assert index(client, protocol)["add_sub"]["state"] == "READY"


def test_load_model_needs_explicit_mode():
    result = subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", "--model-repository",
                             str(REPOS / "models"), "--load-model", "add_sub"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert "Use of '--load-model' requires setting '--model-control-mode=explicit' as well." in result.stderr
    result = subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", "--model-repository",
                             str(REPOS / "models"), "--model-control-mode", "explicit", "--load-model", "nope"],
                            capture_output=True, text=True, timeout=60)
    # Triton 2.51: the start fails ("failed to load all models"), the log names the model
    assert result.returncode == 1 and "failed to load all models" in result.stderr, result.stderr
    assert "failed to poll model 'nope': model not found in any model repository." in result.stderr


def test_the_wildcard_must_be_the_only_load_model():
    result = subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", "--model-repository",
                             str(REPOS / "models"), "--model-control-mode", "explicit", "--load-model", "*",
                             "--load-model", "add_sub"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "Wildcard model name '*' must be the ONLY startup model if specified at all." in result.stderr


# Triton 2.51 (core r24.10 LoadUnloadModel) for a name not in the repository: INTERNAL; the name checks (core's
# ValidateModelName, after 2.51): INVALID_ARG. Through both clients, HTTP's code as Triton's HTTP front-end maps them.
LOAD_ERRORS = [
    ("nope", {"grpc": "StatusCode.INTERNAL", "http": "500"},
     "failed to load 'nope', failed to poll from model repository"),
    ("..", {"grpc": "StatusCode.INVALID_ARGUMENT", "http": "400"},
     "invalid model name '..', model name must not contain path traversal characters"),
    ("  ", {"grpc": "StatusCode.INVALID_ARGUMENT", "http": "400"},
     "Model name cannot be empty. Please enter a valid name to deploy."),
    ("\n\t", {"grpc": "StatusCode.INVALID_ARGUMENT", "http": "400"},
     "Model name cannot be empty. Please enter a valid name to deploy."),
]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_load_errors_have_triton_s_code_and_words(repo, protocol):
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit") as server:
        client = client_for(server, protocol)
        for name, code, message in LOAD_ERRORS:
            with pytest.raises(InferenceServerException) as info:
                client.load_model(name)
            assert str(info.value.status()) == code[protocol], (name, info.value)
            assert info.value.message() == message, name
        assert client.is_server_live()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_load_from_uploaded_files_stays_in_a_server_folder(repo, tmp_path_factory, protocol):
    outside = tmp_path_factory.mktemp("outside")
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit", "--allow-model-upload") as server:
        client = client_for(server, protocol)
        config = json.dumps({"name": "uploaded", "backend": "python", "max_batch_size": 0,
                             "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1]}],
                             "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}]})
        source = SCALE_MODEL.format(factor=7.0, release="").encode()
        with pytest.raises(InferenceServerException, match="must be relative to the model folder"):
            client.load_model("uploaded", config=config, files={f"file:../../{outside.name}/x.py": source})
        assert not list(outside.iterdir())
        client.load_model("uploaded", config=config, files={"file:1/model.py": source})
        x = np.array([1.0], np.float32)
        tensor = CLIENTS[protocol].InferInput("X", [1], "FP32")
        tensor.set_data_from_numpy(x)
        np.testing.assert_array_equal(client.infer("uploaded", [tensor]).as_numpy("Y"), [7.0])
        assert not (repo / "uploaded").exists()  # nothing written into the repository



def test_uploaded_files_under_a_model_name_that_is_a_path_are_refused(repo, tmp_path_factory):
    """The model's name becomes the upload's folder: an absolute name or one with '..' would write the files (and load
    code) anywhere the server may write. (gRPC only: HTTP cannot put such a name in its path.)"""
    protocol = "grpc"
    outside = tmp_path_factory.mktemp("outside")
    names = [str(outside / "abs"), f"../../../../../../..{outside}/dots", ".."]
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit", "--allow-model-upload") as server:
        client = client_for(server, protocol)
        for name in names:
            config = json.dumps({"name": name, "backend": "python", "max_batch_size": 0,
                                 "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1]}],
                                 "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}]})
            with pytest.raises(InferenceServerException, match="must not contain path traversal characters"):
                source = SCALE_MODEL.format(factor=2.0, release="").encode()
                client.load_model(name, config=config, files={"file:1/model.py": source})
        assert not list(outside.iterdir())
        config = json.dumps({"name": "clash", "backend": "python", "max_batch_size": 0})
        for files in ({"file:1": b"x", "file:1/model.py": b"x"}, {"file:1/model.py\0": b"x"}):
            with pytest.raises(InferenceServerException, match="cannot write file '1") as info:
                client.load_model("clash", config=config, files=files)
            assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
            assert "pytriton-model-" not in info.value.message()  # (no server path in the answer)
        assert client.is_server_live()


def test_load_parameters_of_the_wrong_kind_are_refused(repo):
    """Found by fuzzing (tests/fuzz, harness repository): a `file:` value over HTTP with a character that is not ASCII
    (base64 refuses it with ValueError, not the binascii.Error caught) and, over gRPC, a `config` that is not a
    string_param or a file that is not a bytes_param (an int has no decode/encode) failed with an internal error;
    they are refused as Triton refuses them, INVALID_ARGUMENT, and the server goes on."""
    config = json.dumps({"backend": "python", "max_batch_size": 0})
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit") as server:
        body = json.dumps({"parameters": {"config": config, "file:1/model.py": "cGFzcw\u00e9="}}).encode()
        request = urllib.request.Request(f"http://{server.http_url}/v2/repository/models/up/load", data=body,
                                         method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=10)
        assert info.value.code == 400
        assert json.loads(info.value.read()) == {
            "error": "parameter 'file:1/model.py': the file's content must be base64"}
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel := grpc.insecure_channel(server.grpc_url))
        for parameters, message in (
            ({"config": service_pb2.ModelRepositoryParameter(int64_param=1)},
             "invalid value type for load parameter 'config', expected string_param."),
            ({"config": service_pb2.ModelRepositoryParameter(bool_param=True)},
             "invalid value type for load parameter 'config', expected string_param."),
            ({"config": service_pb2.ModelRepositoryParameter(string_param=config),
              "file:1/model.py": service_pb2.ModelRepositoryParameter(int64_param=3)},
             "invalid value type for load parameter 'file:1/model.py', expected bytes_param."),
        ):
            with pytest.raises(grpc.RpcError) as error:
                stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(model_name="up", parameters=parameters))
            assert (error.value.code(), error.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
        channel.close()
        assert client_for(server, "http").is_server_live()


SLOW_INIT_MODEL = """
import os
import time

RELEASE = {release!r}


class TritonPythonModel:
    def initialize(self, args):
        deadline = time.monotonic() + 60  # (bounded: a broken test must not hold the worker for ever)
        while not os.path.exists(RELEASE) and time.monotonic() < deadline:
            time.sleep(0.01)

    def execute(self, requests):
        raise AssertionError("not called")
"""


def test_index_shows_loading_while_initialize_runs(repo):
    """initialize() holds until the test has seen the model LOADING in the index, then lets it go: READY."""
    release = repo / "release"
    (repo / "slow").mkdir()
    (repo / "slow" / "config.pbtxt").write_text(SCALE_CONFIG.replace('"scale"', '"slow"'))
    (repo / "slow" / "1").mkdir()
    (repo / "slow" / "1" / "model.py").write_text(SLOW_INIT_MODEL.format(release=str(release)))
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit") as server:
        client = client_for(server, "grpc")
        loader = threading.Thread(target=client_for(server, "http").load_model, args=("slow",))
        loader.start()
        try:
            wait_until(lambda: index(client, "grpc")["slow"].get("state") == "LOADING", "slow LOADING in the index")
            assert loader.is_alive()  # the load answers once initialize() returns
        finally:
            release.touch()
            loader.join(60)
        assert index(client, "grpc")["slow"]["state"] == "READY"


def test_load_and_unload_stay_behind_the_model_repository_restriction(repo):
    token = "repo-token"
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit",
               "--http-restricted-api", f"model-repository:triton-access-token={token}",
               "--grpc-restricted-protocol", f"model-repository:triton-access-token={token}") as server:
        http, grpc_client = client_for(server, "http"), client_for(server, "grpc")
        for call in (lambda **kw: http.load_model("scale", **kw), lambda **kw: grpc_client.load_model("scale", **kw),
                     lambda **kw: http.unload_model("scale", **kw), http.get_model_repository_index):
            with pytest.raises(InferenceServerException, match="restricted"):
                call()
        assert not http.is_model_ready("scale")
        http.load_model("scale", headers={"triton-access-token": token})
        assert http.is_model_ready("scale")
        grpc_client.unload_model("scale", headers={"triton-grpc-protocol-triton-access-token": token})
        assert not http.is_model_ready("scale")


# Triton 2.51 with a repository agent its build does not ship (none: the wheel has no repoagents folder): the model
# folder fails its poll, logged as "Poll failed for model directory 'agents': unable to find
# 'libtritonrepoagent_checksum.so' for repo agent 'checksum', searched: /opt/tritonserver/repoagents", and a load
# answers INTERNAL (HTTP 500) "failed to load 'agents', failed to poll from model repository".
AGENTS_CONFIG = (SCALE_CONFIG.replace('"scale"', '"agents"')
                 + 'model_repository_agents { agents [ { name: "checksum" } ] }\n')


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_repository_agent_fails_the_poll_as_in_triton(repo, protocol):
    (repo / "agents" / "1").mkdir(parents=True)
    (repo / "agents" / "config.pbtxt").write_text(AGENTS_CONFIG)
    (repo / "agents" / "1" / "model.py").write_text(SCALE_MODEL.format(factor=1.0, release=""))
    with serve("--model-repository", str(repo), "--model-control-mode", "explicit") as server:
        client = client_for(server, protocol)
        with pytest.raises(InferenceServerException) as info:
            client.load_model("agents")
        assert str(info.value.status()) == {"grpc": "StatusCode.INTERNAL", "http": "500"}[protocol]
        assert info.value.message() == "failed to load 'agents', failed to poll from model repository"
        client.load_model("scale")
        assert client.is_model_ready("scale") and not client.is_model_ready("agents")
    assert ("unable to find 'libtritonrepoagent_checksum.so' for repo agent 'checksum' (repository agents are not "
            "supported)") in server.log
