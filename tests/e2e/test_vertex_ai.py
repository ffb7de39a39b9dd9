"""Triton's Vertex AI endpoint (`--allow-vertex-ai true`): health and predict routes from AIP_HEALTH_ROUTE and
AIP_PREDICT_ROUTE, predict on the default model (JSON and binary), the X-Vertex-Ai-Triton-Redirect header to other
KServe routes (inference on another model, repository index, metadata, metrics; changes refused), and Triton's
start-up errors; plain HTTP requests as Vertex AI sends them."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.paths import REPO
from tests._support.serving import ServerProcess
from tests.e2e.platform_http import VERTEX_MIME, add_sub_binary, add_sub_json, platform_port, request, split_binary

MODELS = REPO / "tests" / "repositories" / "models"
SERVICE = "Vertex AI HTTPService"
ROUTES = {"AIP_PREDICT_ROUTE": "/v1/endpoints/e1/deployedModels/m1:predict", "AIP_HEALTH_ROUTE": "/health-check"}
REDIRECT = "X-Vertex-Ai-Triton-Redirect"
TEXT = json.dumps({"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1], "data": ["ab"]}]}).encode()


def _args(repository: Path, *args: str) -> list[str]:
    return ["--model-repository", str(repository), "--allow-vertex-ai", "true", "--vertex-ai-port", "0",
            "--vertex-ai-address", "127.0.0.1", *args]


@pytest.fixture(scope="module")
def vertex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """add_sub and text_upper served, add_sub the default model: the Vertex AI port."""
    repository = tmp_path_factory.mktemp("vertex")
    for name in ("add_sub", "text_upper"):
        shutil.copytree(MODELS / name, repository / name)
    server = ServerProcess(_args(repository, "--vertex-ai-default-model", "add_sub"), env=ROUTES)
    try:
        yield platform_port(server, SERVICE)
    finally:
        code = server.stop()
        assert code == 0, f"server exited with {code}; log:\n{server.log}"


def test_health_route(vertex: int) -> None:
    assert request(vertex, "GET", "/health-check")[::2] == (200, b"")
    status, _, body = request(vertex, "POST", "/health-check")
    assert (status, json.loads(body)) == (405, {"error": "Method Not Allowed"})
    assert request(vertex, "GET", "/v2/health/ready")[::2] == (400, b"")  # only the AIP_* routes are served


def test_predict_runs_the_default_model(vertex: int) -> None:
    route = ROUTES["AIP_PREDICT_ROUTE"]
    status, headers, body = request(vertex, "POST", route, add_sub_json([1, 2, 3, 4], [1, 1, 1, 1]),
                                    {"Content-Type": "application/json"})
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    answer = json.loads(body)
    assert answer["model_name"] == "add_sub"
    assert {o["name"]: o["data"] for o in answer["outputs"]} == {"OUTPUT0": [2.0, 3.0, 4.0, 5.0],
                                                                  "OUTPUT1": [0.0, 1.0, 2.0, 3.0]}
    status, _, body = request(vertex, "GET", route)
    assert (status, json.loads(body)) == (405, {"error": "Method Not Allowed"})


def test_predict_with_binary_tensors(vertex: int) -> None:
    body, size = add_sub_binary([1, 2, 3, 4], [1, 1, 1, 1])
    status, headers, answer = request(vertex, "POST", ROUTES["AIP_PREDICT_ROUTE"], body,
                                      {"Content-Type": f"{VERTEX_MIME}{size}"})
    assert status == 200, answer
    # As Triton's Vertex AI endpoint: the answer is sized as the KServe route's
    assert headers["content-type"] == "application/octet-stream"
    head, data = split_binary(answer, int(headers["inference-header-content-length"]))
    assert struct.unpack("<4f", data) == (2.0, 3.0, 4.0, 5.0)
    assert head["outputs"][1]["data"] == [0.0, 1.0, 2.0, 3.0]
    status, _, answer = request(vertex, "POST", ROUTES["AIP_PREDICT_ROUTE"], body,
                                {"Content-Type": f"{VERTEX_MIME}{len(body) + 1}"})
    assert (status, json.loads(answer)) == (
        400, {"error": f"inference header size should be in range (0, {len(body)}), got: {len(body) + 1}"})


def test_redirect_to_inference_on_another_model(vertex: int) -> None:
    status, _, body = request(vertex, "POST", ROUTES["AIP_PREDICT_ROUTE"], TEXT,
                              {REDIRECT: "v2/models/text_upper/infer"})
    assert status == 200, body
    answer = json.loads(body)
    assert (answer["model_name"], answer["outputs"][0]["data"]) == ("text_upper", ["AB"])
    status, _, body = request(vertex, "POST", ROUTES["AIP_PREDICT_ROUTE"], TEXT, {REDIRECT: "v2/models/nope/infer"})
    assert (status, json.loads(body)) == (404, {"error": "Request for unknown model: 'nope' is not found"})


def test_redirect_to_read_only_routes(vertex: int) -> None:
    predict = ROUTES["AIP_PREDICT_ROUTE"]

    def redirected(route: str) -> tuple[int, bytes]:
        status, _, body = request(vertex, "POST", predict, b"", {REDIRECT: route})
        return status, body

    status, body = redirected("v2/repository/index")
    assert status == 200
    assert sorted((e["name"], e["state"]) for e in json.loads(body)) == [("add_sub", "READY"),
                                                                          ("text_upper", "READY")]
    status, body = redirected("v2")
    assert (status, json.loads(body)["name"]) == (200, "triton")
    assert redirected("v2/health/ready") == (200, b"")
    assert redirected("v2/models/add_sub/ready") == (200, b"")
    status, body = redirected("v2/models/add_sub")
    assert (status, json.loads(body)["name"]) == (200, "add_sub")
    status, body = redirected("v2/models/add_sub/versions/1/config")
    assert (status, json.loads(body)["max_batch_size"]) == (200, 8)
    status, body = redirected("v2/models/stats")
    assert status == 200 and "model_stats" in json.loads(body)
    status, body = redirected("metrics")
    assert status == 200 and b"nv_inference_request_success" in body
    status, body = redirected("v2/systemsharedmemory/status")
    assert (status, json.loads(body)) == (200, [])


def test_redirect_refusals(vertex: int) -> None:
    predict = ROUTES["AIP_PREDICT_ROUTE"]
    for route in ("v2/repository/models/add_sub/unload", "v2/repository/models/add_sub/load",
                  "v2/systemsharedmemory/region/r/register", "v2/cudasharedmemory/unregister"):
        assert request(vertex, "POST", predict, b"{}", {REDIRECT: route})[::2] == (403, b""), route
    for route in ("bogus", "v2/models/add_sub/generate", "v2/logging"):
        assert request(vertex, "POST", predict, b"{}", {REDIRECT: route})[::2] == (400, b""), route
    assert request(vertex, "GET", predict, b"", {REDIRECT: "v2"})[::2] == (405, b"")
    assert request(vertex, "GET", "/health-check")[0] == 200  # still up, add_sub still loaded
    assert request(vertex, "POST", predict, b"", {REDIRECT: "v2/models/add_sub/ready"})[0] == 200


def _start_failure(repository: Path, env: dict[str, str], *args: str) -> str:
    command = [sys.executable, "-m", "pytriton.cli", "serve", *_args(repository, *args), "--http-port", "0",
               "--grpc-port", "0", "--metrics-port", "0", "--http-address", "127.0.0.1", "--grpc-address",
               "127.0.0.1", "--metrics-address", "127.0.0.1"]
    environment = {k: v for k, v in __import__("os").environ.items() if not k.startswith("AIP_")}
    done = subprocess.run(command, cwd=REPO, env={**environment, **env}, capture_output=True, text=True,
                          timeout=90, check=False)
    assert done.returncode != 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_start_up_errors(tmp_path: Path) -> None:
    for name in ("add_sub", "text_upper"):
        shutil.copytree(MODELS / name, tmp_path / name)
    assert "API_PREDICT_ROUTE is not defined for Vertex AI endpoint" in _start_failure(
        tmp_path, {"AIP_HEALTH_ROUTE": "/h"})
    assert "AIP_HEALTH_ROUTE is not defined for Vertex AI endpoint" in _start_failure(
        tmp_path, {"AIP_PREDICT_ROUTE": "/p"})
    assert ("failed to start Vertex AI service: Invalid argument - Expect the model repository contains only a "
            "single model if default model is not specified") in _start_failure(tmp_path, ROUTES)
    assert "Expect the default model 'nope' is loaded" in _start_failure(
        tmp_path, ROUTES, "--vertex-ai-default-model", "nope")


def test_the_only_model_is_the_default_and_aip_variables_set_the_defaults(tmp_path: Path) -> None:
    """AIP_MODE=PREDICTION allows Vertex AI and turns HTTP and gRPC off; the only model is the default."""
    shutil.copytree(MODELS / "add_sub", tmp_path / "add_sub")
    server = ServerProcess(["--model-repository", str(tmp_path), "--vertex-ai-port", "0", "--vertex-ai-address",
                            "127.0.0.1"], env={**ROUTES, "AIP_MODE": "PREDICTION"})
    try:
        port = platform_port(server, SERVICE)
        assert "Started HTTPService" not in server.log and "Started GRPCInferenceService" not in server.log
        status, _, body = request(port, "POST", ROUTES["AIP_PREDICT_ROUTE"], add_sub_json([0, 0, 0, 0], [1, 2, 3, 4]))
        assert status == 200, body
        assert json.loads(body)["outputs"][1]["data"] == [-1.0, -2.0, -3.0, -4.0]
    finally:
        assert server.stop() == 0
