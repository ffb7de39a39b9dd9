"""Triton's SageMaker endpoint (`--allow-sagemaker true`): /ping, /invocations with JSON and with binary tensors
(sized by SageMaker's content type), the default model (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME, the only model, the
ambiguous case), the multi-model routes, and the port checks; plain HTTP requests as SageMaker sends them."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.paths import REPO, REPOSITORIES
from tests._support.serving import ServerProcess
from tests.e2e.platform_http import (
    SAGEMAKER_MIME,
    add_sub_binary,
    add_sub_json,
    platform_port,
    request,
    split_binary,
)

MODELS = REPO / "tests" / "repositories" / "models"
SERVICE = "Sagemaker HTTPService"
GATED_CONFIG = """
name: "gated"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""
GATED_MODEL = """
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        gate = os.path.join(os.path.dirname(__file__), "..", "gate")
        while not os.path.exists(gate):  # loading lasts until the test opens the gate
            time.sleep(0.02)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X")
                                                            .as_numpy())]) for r in requests]
"""


def _server(repository: Path, *args: str, env: dict[str, str] | None = None) -> ServerProcess:
    return ServerProcess(["--model-repository", str(repository), "--allow-sagemaker", "true", "--sagemaker-port",
                          "0", "--sagemaker-address", "127.0.0.1", *args], env=env)


def _stopped(server: ServerProcess) -> None:
    code = server.stop()
    assert code == 0, f"server exited with {code}; log:\n{server.log}"


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A server of one model (add_sub), SAGEMAKER_TRITON_DEFAULT_MODEL_NAME not set: its SageMaker port."""
    repository = tmp_path_factory.mktemp("single")
    shutil.copytree(MODELS / "add_sub", repository / "add_sub")
    server = _server(repository, env={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": ""})
    yield platform_port(server, SERVICE)
    _stopped(server)


def test_ping_answers_200_without_a_body_when_ready(single: int) -> None:
    status, _, body = request(single, "GET", "/ping")
    assert (status, body) == (200, b"")
    status, headers, body = request(single, "POST", "/ping")
    assert (status, headers["content-type"], json.loads(body)) == (405, "application/json",
                                                                   {"error": "Method Not Allowed"})


def test_invocations_with_json_runs_the_only_model(single: int) -> None:
    status, headers, body = request(single, "POST", "/invocations", add_sub_json([1, 2, 3, 4], [1, 1, 1, 1]),
                                    {"Content-Type": "application/json"})
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    answer = json.loads(body)
    assert (answer["model_name"], answer["model_version"]) == ("add_sub", "1")
    outputs = {o["name"]: o for o in answer["outputs"]}
    assert outputs["OUTPUT0"]["data"] == [2.0, 3.0, 4.0, 5.0]
    assert outputs["OUTPUT1"]["data"] == [0.0, 1.0, 2.0, 3.0]
    assert outputs["OUTPUT0"]["shape"] == [1, 4]


def test_invocations_with_binary_tensors_sizes_the_header_in_the_content_type(single: int) -> None:
    body, header_size = add_sub_binary([1, 2, 3, 4], [1, 1, 1, 1])
    status, headers, answer = request(single, "POST", "/invocations", body,
                                      {"Content-Type": f"{SAGEMAKER_MIME}{header_size}"})
    assert status == 200, answer
    content_type = headers["content-type"]
    assert content_type.startswith(SAGEMAKER_MIME)
    assert "inference-header-content-length" not in headers  # (as Triton: the size is in the content type)
    head, data = split_binary(answer, int(content_type[len(SAGEMAKER_MIME):]))
    outputs = {o["name"]: o for o in head["outputs"]}
    assert outputs["OUTPUT0"]["parameters"] == {"binary_data_size": 16}
    assert struct.unpack("<4f", data) == (2.0, 3.0, 4.0, 5.0)
    assert outputs["OUTPUT1"]["data"] == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("content_type", "message"),
    [
        (f"text/plain; {SAGEMAKER_MIME}10", f"expect MIME type for binary data starts with '{SAGEMAKER_MIME}', got: "
                                            f"text/plain; {SAGEMAKER_MIME}10"),
        (f"{SAGEMAKER_MIME}abc", "Unable to parse inference header size, got: abc"),
        (f"{SAGEMAKER_MIME}99999", "inference header size should be in range (0, {size}), got: 99999"),
        (f"{SAGEMAKER_MIME}0", "[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced "
                               "but got 2 inputs in 'add_sub' model configuration"),
    ],
)
def test_invocations_refuses_a_bad_binary_content_type(single: int, content_type: str, message: str) -> None:
    body, _ = add_sub_binary([1, 2, 3, 4], [1, 1, 1, 1])
    status, _, answer = request(single, "POST", "/invocations", body, {"Content-Type": content_type})
    assert (status, json.loads(answer)) == (400, {"error": message.format(size=len(body))})


def test_invocations_errors_and_other_routes(single: int) -> None:
    status, _, answer = request(single, "GET", "/invocations")
    assert (status, json.loads(answer)) == (405, {"error": "Method Not Allowed"})
    one_input = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                        "data": [1, 2, 3, 4]}]}).encode()
    status, _, answer = request(single, "POST", "/invocations", one_input)
    assert status == 400
    assert "missing required input(s) ['INPUT1']" in json.loads(answer)["error"]
    for method, path in (("GET", "/ping/"), ("GET", "/v2/health/ready"), ("POST", "/nothing"), ("PUT", "/models/x")):
        assert request(single, method, path)[::2] == (400, b""), (method, path)  # Triton: 400 without a body


def test_default_model_from_the_environment(tmp_path: Path) -> None:
    server = _server(MODELS, env={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "text_upper"})
    try:
        port = platform_port(server, SERVICE)
        body = json.dumps({"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [2], "data": ["ab", "cd"]}]})
        status, _, answer = request(port, "POST", "/invocations", body.encode())
        assert status == 200, answer
        reply = json.loads(answer)
        assert reply["model_name"] == "text_upper"
        assert reply["outputs"][0]["data"] == ["AB", "CD"]
    finally:
        _stopped(server)


def test_several_models_without_a_default_is_an_error_naming_the_variable() -> None:
    server = _server(MODELS, env={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": ""})
    try:
        port = platform_port(server, SERVICE)
        status, _, answer = request(port, "POST", "/invocations", add_sub_json([1, 2, 3, 4], [1, 1, 1, 1]))
        assert status == 400
        message = json.loads(answer)["error"]
        assert message.startswith("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME is not set and the server serves 5 models (")
        assert "add_sub, classifier, repeat_int, text_upper, versioned" in message
        assert request(port, "GET", "/ping")[0] == 200  # the server stays up
    finally:
        _stopped(server)


def test_an_unknown_default_model_is_not_found(tmp_path: Path) -> None:
    shutil.copytree(MODELS / "add_sub", tmp_path / "add_sub")
    server = _server(tmp_path, env={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "nope"})
    try:
        status, _, answer = request(platform_port(server, SERVICE), "POST", "/invocations",
                                    add_sub_json([1, 2, 3, 4], [1, 1, 1, 1]))
        assert (status, json.loads(answer)) == (404, {"error": "Request for unknown model: 'nope' is not found"})
    finally:
        _stopped(server)


@pytest.mark.parametrize("ping_mode", ["ready", "live"])
def test_ping_while_a_model_loads(tmp_path: Path, ping_mode: str) -> None:
    """Not ready while a model loads: /ping answers 400 (200 with SAGEMAKER_TRITON_PING_MODE=live), then 200."""
    (tmp_path / "gated" / "1").mkdir(parents=True)
    (tmp_path / "gated" / "config.pbtxt").write_text(GATED_CONFIG)
    (tmp_path / "gated" / "1" / "model.py").write_text(GATED_MODEL)
    server = _server(tmp_path, "--model-control-mode", "explicit", env={"SAGEMAKER_TRITON_PING_MODE": ping_mode})
    try:
        port = platform_port(server, SERVICE)
        http_port = int(server.http_url.rsplit(":", 1)[1])
        assert request(port, "GET", "/ping")[0] == 200
        loaded: list[int] = []
        loader = threading.Thread(target=lambda: loaded.append(
            request(http_port, "POST", "/v2/repository/models/gated/load")[0]))
        loader.start()
        try:
            index: list = []
            deadline = time.monotonic() + 30
            while not index and time.monotonic() < deadline:  # until the model is being loaded
                index = json.loads(request(http_port, "POST", "/v2/repository/index")[2])
                index = [e for e in index if e.get("state") == "LOADING"]
            assert index, "the model never started loading"
            status, _, body = request(port, "GET", "/ping")
            assert (status, body) == ((400, b"") if ping_mode == "ready" else (200, b""))
        finally:
            (tmp_path / "gated" / "gate").write_text("open")
            loader.join(60)
        assert loaded == [200]
        assert request(port, "GET", "/ping")[0] == 200
    finally:
        _stopped(server)


def test_port_checks_refuse_to_start(tmp_path: Path) -> None:
    shutil.copytree(MODELS / "add_sub", tmp_path / "add_sub")
    base = [sys.executable, "-m", "pytriton.cli", "serve", "--model-repository", str(tmp_path),
            "--allow-sagemaker", "true", "--sagemaker-address", "127.0.0.1", "--http-address", "127.0.0.1",
            "--grpc-address", "127.0.0.1", "--metrics-address", "127.0.0.1"]

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*base, *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)

    outside = run("--sagemaker-safe-port-range", "9000-9100", "--http-port", "18731", "--grpc-port", "9001",
                  "--metrics-port", "9002", "--sagemaker-port", "9003")
    assert outside.returncode != 0
    assert "The server cannot listen to HTTP requests at port 18731, allowed port range is [9000, 9100]" in \
        outside.stderr + outside.stdout
    same = run("--http-port", "18732", "--sagemaker-port", "18732", "--grpc-port", "0", "--metrics-port", "0")
    assert same.returncode != 0
    assert ("The server cannot listen to HTTP requests and SageMaker requests at the same address and port "
            "127.0.0.1:18732") in same.stderr + same.stdout
    malformed = run("--sagemaker-safe-port-range", "9000", "--http-port", "0")
    assert malformed.returncode == 2
    assert "Cannot parse pair option due to incorrect number of inputs." in malformed.stderr
    assert "Found: 9000" in malformed.stderr


def test_http_restrictions_apply_to_the_sagemaker_port(tmp_path: Path) -> None:
    shutil.copytree(MODELS / "add_sub", tmp_path / "add_sub")
    server = _server(tmp_path, "--http-restricted-api", "inference,health:secret=s3")
    try:
        port = platform_port(server, SERVICE)
        status, _, body = request(port, "POST", "/invocations", add_sub_json([1, 2, 3, 4], [1, 1, 1, 1]))
        assert status == 403
        assert "secret" in json.loads(body)["error"]
        assert request(port, "GET", "/ping")[0] == 403
        assert request(port, "GET", "/ping", headers={"secret": "s3"})[0] == 200
        status, _, body = request(port, "POST", "/invocations", add_sub_json([1, 2, 3, 4], [1, 1, 1, 1]),
                                  {"secret": "s3"})
        assert status == 200, body
    finally:
        _stopped(server)


@pytest.mark.parametrize("inference_type", ["generate", "generate_stream"])
def test_invocations_runs_generate_when_the_inference_type_says_so(inference_type: str) -> None:
    """SAGEMAKER_TRITON_INFERENCE_TYPE generate / generate_stream: /invocations is the default model's generate route
    (as Triton's SageMaker server after 2.51 answers it)."""
    env = {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "gen_stream", "SAGEMAKER_TRITON_INFERENCE_TYPE": inference_type}
    server = _server(REPOSITORIES / "generate", env=env)
    try:
        port = platform_port(server, SERVICE)
        n = 3 if inference_type == "generate_stream" else 1
        status, headers, body = request(port, "POST", "/invocations",
                                        json.dumps({"id": "5", "text_input": "s", "n": n}).encode())
        assert status == 200, body
        answers = [{"id": "5", "model_name": "gen_stream", "model_version": "1", "text_output": f"s {i}"}
                   for i in range(n)]
        if inference_type == "generate":
            assert (headers["content-type"], json.loads(body)) == ("application/json", answers[0])
        else:
            assert headers["content-type"] == "text/event-stream; charset=utf-8"
            assert body == b"".join(b"data: " + json.dumps(a, separators=(",", ":")).encode() + b"\n\n"
                                    for a in answers)
        status, _, body = request(port, "GET", "/invocations")
        assert (status, json.loads(body)) == (405, {"error": "Method Not Allowed"})
    finally:
        _stopped(server)
