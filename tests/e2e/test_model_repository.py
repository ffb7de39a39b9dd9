"""`pytriton serve --model-repository DIR`: Triton Python-backend models (tests/repositories) served over gRPC and
HTTP, checked with the real tritonclient; beside a callable in one server; a failing initialize() refuses the start;
a KIND_GPU instance group pinned with CUDA_VISIBLE_DEVICES (GPU discovery faked)."""

from __future__ import annotations

import concurrent.futures
import os
import queue
import subprocess
import sys

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._fake_nvml import fake_gpus, fake_nvml_env
from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve, tensor_args

REPOS = REPO / "tests" / "repositories"


@pytest.fixture(scope="module")
def server():
    """The `models` repository served beside a callable (tests.models:add_sub, as add_sub_callable) in one server."""
    callable_args = ["--model-name", "add_sub_callable",
                     *tensor_args("input", [("INPUT0", "fp32", "-1"), ("INPUT1", "fp32", "-1")]),
                     *tensor_args("output", [("OUTPUT0", "fp32", "-1"), ("OUTPUT1", "fp32", "-1")])]
    with serve("tests.models:add_sub", *callable_args, "--model-repository", str(REPOS / "models")) as s:
        yield s


def fp32_input(protocol: str, name: str, array: np.ndarray):
    tensor = CLIENTS[protocol].InferInput(name, list(array.shape), "FP32")
    tensor.set_data_from_numpy(array)
    return tensor


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_add_sub_over_both_protocols(server, protocol):
    client = client_for(server, protocol)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), dtype=np.float32)
    result = client.infer("add_sub", [fp32_input(protocol, "INPUT0", a), fp32_input(protocol, "INPUT1", b)])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert client.is_model_ready("add_sub")


def test_dynamic_batching_merges_requests(server):
    """Concurrent requests of one row each reach execute() together (the response parameter says how many)."""
    client = client_for(server, "grpc")
    a = np.ones((1, 4), dtype=np.float32)

    def one(_):
        result = client.infer("add_sub", [fp32_input("grpc", "INPUT0", a), fp32_input("grpc", "INPUT1", a)])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a * 2)
        return result.get_response().parameters["batch"].int64_param

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        batches = list(pool.map(one, range(8)))
    assert max(batches) > 1, batches


def test_model_config_reflects_config_pbtxt(server):
    config = client_for(server, "grpc").get_model_config("add_sub", as_json=True)["config"]
    assert config["max_batch_size"] == 8
    assert config["backend"] == "python"
    assert config["dynamic_batching"]["preferred_batch_size"] == [4]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == "20000"
    assert config["parameters"]["scale"]["string_value"] == "1"
    assert config["version_policy"] == {"latest": {"num_versions": 1}}
    assert config["default_model_filename"] == "model.py"
    classifier = client_for(server, "http").get_model_config("classifier")
    assert classifier["output"][0]["label_filename"] == "labels.txt"


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_bytes_model_and_per_request_error(server, protocol):
    module = CLIENTS[protocol]
    client = client_for(server, protocol)
    text = np.array([b"abc", b"xyz"], dtype=np.object_)
    tensor = module.InferInput("TEXT", [2], "BYTES")
    tensor.set_data_from_numpy(text)
    result = client.infer("text_upper", [tensor], parameters={"suffix": "!"})
    assert list(result.as_numpy("UPPER")) == [b"ABC!", b"XYZ!"]
    tensor = module.InferInput("TEXT", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([b"fail"], dtype=np.object_))
    with pytest.raises(InferenceServerException, match="text_upper refuses 'fail'"):
        client.infer("text_upper", [tensor])
    assert client.is_server_live()
    tensor.set_data_from_numpy(np.array([b"ok"], dtype=np.object_))
    assert list(client.infer("text_upper", [tensor]).as_numpy("UPPER")) == [b"OK"]


def test_decoupled_model_streams_through_its_response_sender(server):
    client = client_for(server, "grpc")
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        tensor = grpcclient.InferInput("IN", [3], "INT32")
        tensor.set_data_from_numpy(np.array([7, 8, 9], dtype=np.int32))
        client.async_stream_infer("repeat_int", [tensor], request_id="r", enable_empty_final_response=True)
        values = []
        while True:
            result, error = results.get(timeout=20)
            assert error is None, error
            response = result.get_response()
            if response.parameters["triton_final_response"].bool_param:
                break
            values.append(int(result.as_numpy("OUT")[0]))
        assert values == [7, 8, 9]
    finally:
        client.stop_stream()


def test_default_version_policy_serves_the_latest(server):
    client = client_for(server, "http")
    tensor = httpclient.InferInput("X", [1], "INT32")
    tensor.set_data_from_numpy(np.zeros(1, dtype=np.int32))
    assert client.infer("versioned", [tensor]).as_numpy("VERSION").tolist() == [2]
    assert client.infer("versioned", [tensor], model_version="2").as_numpy("VERSION").tolist() == [2]
    with pytest.raises(InferenceServerException, match="version 1 is not found"):
        client.infer("versioned", [tensor], model_version="1")


def test_classification_uses_the_label_file(server):
    client = client_for(server, "grpc")
    scores = np.array([[0.1, 0.7, 0.05, 0.15]], dtype=np.float32)
    output = grpcclient.InferRequestedOutput("SCORES", class_count=2)
    result = client.infer("classifier", [fp32_input("grpc", "SCORES_IN", scores)], outputs=[output])
    assert result.as_numpy("SCORES").tolist() == [[b"0.700000:1:dog", b"0.150000:3:fish"]]


def test_callable_beside_repository_models(server):
    client = client_for(server, "http")
    a = np.array([1, 2, 3], dtype=np.float32)
    result = client.infer("add_sub_callable", [fp32_input("http", "INPUT0", a), fp32_input("http", "INPUT1", a)])
    assert result.as_numpy("OUTPUT0").tolist() == [2, 4, 6]
    names = {m["name"] for m in client.get_model_repository_index()}
    assert names >= {"add_sub_callable", "add_sub", "classifier", "repeat_int", "text_upper", "versioned"}


def test_specific_version_policy():
    with serve("--model-repository", str(REPOS / "pinned")) as s:
        client = grpcclient.InferenceServerClient(s.grpc_url)
        tensor = grpcclient.InferInput("X", [1], "INT32")
        tensor.set_data_from_numpy(np.zeros(1, dtype=np.int32))
        assert client.infer("versioned", [tensor]).as_numpy("VERSION").tolist() == [1]
        config = client.get_model_config("versioned", as_json=True)["config"]
        assert config["version_policy"] == {"specific": {"versions": ["1"]}}
    assert "versioned version 1 finalized" in s.log  # finalize() ran when the server stopped; Logger reached the log


def run_cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", *args, "--grpc-port", "0", "--http-port",
                           "0", "--metrics-port", "0", "--grpc-address", "127.0.0.1", "--http-address", "127.0.0.1",
                           "--metrics-address", "127.0.0.1"],
                          cwd=REPO, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=60,
                          check=False)


def test_initialize_that_raises_refuses_the_start():
    result = run_cli(["--model-repository", str(REPOS / "broken_init")])
    assert result.returncode != 0
    assert "init_fails" in result.stderr
    assert "RuntimeError: weights file missing for init_fails" in result.stderr
    assert "model.py" in result.stderr  # the traceback points into the model's file
    assert "server ready" not in result.stderr


def test_kind_gpu_instance_group_is_pinned():
    env = fake_nvml_env(fake_gpus(2))
    with serve("--model-repository", str(REPOS / "gpu"), env=env) as s:
        client = grpcclient.InferenceServerClient(s.grpc_url)
        tensor = grpcclient.InferInput("X", [1], "INT8")
        tensor.set_data_from_numpy(np.zeros(1, dtype=np.int8))
        answer = client.infer("gpu_env", [tensor]).as_numpy("ENV").tolist()
        assert answer == [fake_gpus(2)[1]["uuid"].encode(), b"GPU", b"1"]
        group = client.get_model_config("gpu_env", as_json=True)["config"]["instance_group"][0]
        assert group["kind"] == "KIND_GPU" and group["gpus"] == [1]


def test_kind_model_instances_are_not_pinned_and_see_tritons_args():
    """KIND_MODEL (the model places itself on devices): each of the `count` workers sees every GPU the server sees (no
    CUDA_VISIBLE_DEVICES of its own) and initialize() gets Triton 2.51's args: kind "MODEL", device id "0"."""
    env = {**fake_nvml_env(fake_gpus(2)), "CUDA_VISIBLE_DEVICES": "1,0"}
    with serve("--model-repository", str(REPOS / "kind_model"), env=env) as s:
        client = grpcclient.InferenceServerClient(s.grpc_url)
        tensor = grpcclient.InferInput("X", [1], "INT8")
        tensor.set_data_from_numpy(np.zeros(1, dtype=np.int8))
        seen = {tuple(client.infer("own_devices", [tensor]).as_numpy("ENV").tolist()) for _ in range(8)}
        assert seen <= {(b"1,0", b"MODEL", b"own_devices_0_0", b"0"), (b"1,0", b"MODEL", b"own_devices_0_1", b"0")}
        group = client.get_model_config("own_devices", as_json=True)["config"]["instance_group"]
        assert [(g["kind"], g["count"], g.get("gpus", [])) for g in group] == [("KIND_MODEL", 2, [])]
        assert len(s.worker_pids()) == 2


def test_kind_model_with_gpus_is_refused_in_tritons_words(tmp_path):
    model = tmp_path / "m"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (model / "config.pbtxt").write_text(
        'backend: "python" input [ { name: "X" data_type: TYPE_INT8 dims: [ 1 ] } ] '
        'output [ { name: "Y" data_type: TYPE_INT8 dims: [ 1 ] } ] instance_group [ { kind: KIND_MODEL gpus: [ 0 ] } ]')
    result = run_cli(["--model-repository", str(tmp_path)], fake_nvml_env(fake_gpus(1)))
    assert result.returncode != 0
    assert "instance group m_0 of model m has kind KIND_MODEL but specifies one or more GPUs" in result.stderr


def test_kind_gpu_without_gpus_is_refused():
    result = run_cli(["--model-repository", str(REPOS / "gpu")], fake_nvml_env([]))
    assert result.returncode != 0
    assert "config.pbtxt: field 'instance_group[0].gpus' of model 'gpu_env'" in result.stderr
    assert "invalid or unsupported gpu id 1" in result.stderr


def test_no_target_and_no_repository_is_a_usage_error():
    result = run_cli([])
    assert result.returncode == 2
    assert "give the inference callable MODULE:CALLABLE, --model-repository DIR, or both" in result.stderr


def test_repository_model_named_like_the_callable_is_refused():
    result = run_cli(["tests.models:identity", "--model-name", "add_sub", "--input", "INPUT:fp32:-1", "--output",
                      "OUTPUT:fp32:-1", "--model-repository", str(REPOS / "models")])
    assert result.returncode == 2
    assert "model 'add_sub' of tests.models:identity is also in a model repository" in result.stderr


SIBLINGS_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

SIBLINGS_MODEL = """
import triton_python_backend_utils as pb_utils

import absolute_sibling
import in_model_folder
from . import relative_sibling


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        return config

    def execute(self, requests):
        factor = absolute_sibling.A * relative_sibling.R * in_model_folder.M
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X")
                                                            .as_numpy() * factor)]) for r in requests]
"""


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_model_py_imports_its_siblings_as_tritons_stub_lets_it(tmp_path, protocol):
    """As Triton's stub imports `<version>.model` with the version folder and the model folder on sys.path, a
    model.py may import modules beside it absolutely or relatively (`from . import x`, Triton's QA model multi_file)
    and modules in the model's folder; in auto-complete as in the instances."""
    model = tmp_path / "siblings"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(SIBLINGS_CONFIG)
    (model / "1" / "model.py").write_text(SIBLINGS_MODEL)
    (model / "1" / "absolute_sibling.py").write_text("A = 2.0\n")
    (model / "1" / "relative_sibling.py").write_text("R = 3.0\n")
    (model / "in_model_folder.py").write_text("M = 5.0\n")
    with serve("--model-repository", str(tmp_path)) as server:
        client = client_for(server, protocol)
        x = np.array([1.0, 2.0], dtype=np.float32)
        inp = CLIENTS[protocol].InferInput("X", [2], "FP32")
        inp.set_data_from_numpy(x)
        result = client.infer("siblings", [inp])
        np.testing.assert_array_equal(result.as_numpy("Y"), x * 30.0)
