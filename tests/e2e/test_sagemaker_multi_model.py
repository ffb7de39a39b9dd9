"""Triton's SageMaker multi-model routes: load an unpacked archive (`POST /models`), list and describe it, invoke
it (JSON and binary), refuse a second load of the same name (409), unload it (DELETE), and Triton's answers for
unknown names, bad urls and a server without explicit model control."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.paths import REPO
from tests._support.serving import ServerProcess
from tests.e2e.platform_http import SAGEMAKER_MIME, add_sub_binary, add_sub_json, platform_port, request, split_binary

MODELS = REPO / "tests" / "repositories" / "models"
SERVICE = "Sagemaker HTTPService"


@pytest.fixture(scope="module")
def mme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """A server under explicit model control with an empty repository; SageMaker's archives unpack under `root`."""
    base = tmp_path_factory.mktemp("mme")
    (base / "repository").mkdir()
    root = base / "ml" / "models"
    archive = root / "0123abc" / "model"
    archive.mkdir(parents=True)
    shutil.copytree(MODELS / "add_sub", archive / "add_sub")
    server = ServerProcess(["--model-repository", str(base / "repository"), "--model-control-mode", "explicit",
                            "--allow-sagemaker", "true", "--sagemaker-port", "0", "--sagemaker-address", "127.0.0.1"],
                           env={"PYTRITON_SAGEMAKER_MODELS_ROOT": str(root)})
    try:
        yield platform_port(server, SERVICE), root
    finally:
        code = server.stop()
        assert code == 0, f"server exited with {code}; log:\n{server.log}"


def test_load_list_invoke_unload(mme: tuple[int, Path]) -> None:
    port, root = mme
    url = str(root / "0123abc" / "model")
    assert request(port, "GET", "/models")[::2] == (200, b'{"models":[]}')
    load = json.dumps({"model_name": "0123abc", "url": url}).encode()
    status, _, body = request(port, "POST", "/models", load)
    assert (status, body) == (200, b"")
    status, _, body = request(port, "GET", "/models")
    assert (status, json.loads(body)) == (200, {"models": [{"modelName": "0123abc", "modelUrl": url}]})
    status, _, body = request(port, "GET", "/models/0123abc")
    assert (status, json.loads(body)) == (200, {"modelName": "0123abc", "modelUrl": url})

    status, headers, body = request(port, "POST", "/models/0123abc/invoke", add_sub_json([1, 2, 3, 4], [1, 1, 1, 1]))
    assert status == 200, body
    answer = json.loads(body)
    assert answer["model_name"] == "0123abc"  # served under the archive's name
    assert {o["name"]: o["data"] for o in answer["outputs"]}["OUTPUT0"] == [2.0, 3.0, 4.0, 5.0]
    binary, size = add_sub_binary([1, 2, 3, 4], [2, 2, 2, 2])
    status, headers, body = request(port, "POST", "/models/0123abc/invoke", binary,
                                    {"Content-Type": f"{SAGEMAKER_MIME}{size}"})
    assert status == 200, body
    head, data = split_binary(body, int(headers["content-type"][len(SAGEMAKER_MIME):]))
    assert struct.unpack("<4f", data) == (3.0, 4.0, 5.0, 6.0)

    status, _, body = request(port, "POST", "/models", load)  # the name is taken
    assert status == 409
    assert "0123abc" in json.loads(body)["error"]

    assert request(port, "DELETE", "/models/0123abc")[::2] == (200, b"")
    assert request(port, "GET", "/models/0123abc")[::2] == (404, b"")
    assert request(port, "POST", "/models/0123abc/invoke", add_sub_json([1, 2, 3, 4], [1, 1, 1, 1]))[::2] == \
        (404, b"")
    assert request(port, "GET", "/models")[::2] == (200, b'{"models":[]}')
    # loaded again after the unload
    assert request(port, "POST", "/models", load)[::2] == (200, b"")
    assert request(port, "DELETE", "/models/0123abc")[::2] == (200, b"")


def test_unknown_names_and_bad_urls(mme: tuple[int, Path]) -> None:
    port, root = mme
    assert request(port, "GET", "/models/nope")[::2] == (404, b"")
    assert request(port, "DELETE", "/models/nope")[::2] == (404, b"")
    assert request(port, "POST", "/models/nope/invoke", b"{}")[::2] == (404, b"")
    assert request(port, "POST", "/models", json.dumps({"model_name": "x", "url": "/proc/self"}).encode())[::2] == \
        (400, b"")
    status, _, body = request(port, "POST", "/models", json.dumps({"model_name": "x", "url": "/tmp/x"}).encode())
    assert (status, json.loads(body)) == (400, {"error": f"Invalid \"url\" '/tmp/x': expected a path of the form "
                                                         f"{root}/<hash>/model[/<subdir>]"})
    status, _, body = request(port, "POST", "/models", b"{not json")
    assert status == 400
    assert json.loads(body)["error"].startswith("failed to parse the request JSON buffer")
    missing = root / "missing" / "model"
    status, _, body = request(port, "POST", "/models", json.dumps({"model_name": "m", "url": str(missing)}).encode())
    assert (status, json.loads(body)) == (400, {"error": f"failed to register '{missing}', repository not found"})
    (root / "empty" / "model").mkdir(parents=True)
    status, _, body = request(port, "POST", "/models", json.dumps(
        {"model_name": "empty", "url": str(root / "empty" / "model")}).encode())
    assert status == 400  # nothing to load there
    assert "model 'empty'" in json.loads(body)["error"]
    assert request(port, "GET", "/models")[::2] == (200, b'{"models":[]}')  # and unregistered again


def test_loading_needs_explicit_model_control(tmp_path: Path) -> None:
    root = tmp_path / "ml"
    (root / "h" / "model").mkdir(parents=True)
    shutil.copytree(MODELS / "add_sub", root / "h" / "model" / "add_sub")
    shutil.copytree(MODELS / "add_sub", tmp_path / "repository" / "add_sub")
    server = ServerProcess(["--model-repository", str(tmp_path / "repository"), "--allow-sagemaker", "true",
                            "--sagemaker-port", "0", "--sagemaker-address", "127.0.0.1"],
                           env={"PYTRITON_SAGEMAKER_MODELS_ROOT": str(root)})
    try:
        port = platform_port(server, SERVICE)
        status, _, body = request(port, "POST", "/models", json.dumps(
            {"model_name": "h", "url": str(root / "h" / "model")}).encode())
        assert (status, json.loads(body)) == (
            400, {"error": "repository registration is not allowed if model control mode is not EXPLICIT"})
    finally:
        assert server.stop() == 0
