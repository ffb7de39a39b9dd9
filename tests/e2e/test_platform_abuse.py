"""The SageMaker multi-model routes under a careless or hostile client: a DELETE whose target-model header names
another model (a model of the repository) unloads only the model loaded under the route's name; a `url` that a
symbolic link leads out of the models root is refused like one outside it."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.paths import REPO
from tests._support.serving import ServerProcess
from tests.e2e.platform_http import add_sub_json, platform_port, request

MODELS = REPO / "tests" / "repositories" / "models"
TARGET = "X-Amzn-SageMaker-Target-Model"
TEXT = json.dumps({"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1], "data": ["ab"]}]}).encode()


@pytest.fixture(scope="module")
def mme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path, Path]]:
    """text_upper loaded from the repository; an archive `h1` under the models root and one outside it that a link
    in the root points to. Yields (SageMaker port, models root, base folder)."""
    base = tmp_path_factory.mktemp("mme_abuse")
    shutil.copytree(MODELS / "text_upper", base / "repository" / "text_upper")
    root = base / "ml" / "models"
    shutil.copytree(MODELS / "add_sub", root / "h1" / "model" / "add_sub")
    shutil.copytree(MODELS / "add_sub", base / "outside" / "model" / "add_sub")
    os.symlink(base / "outside", root / "link")
    server = ServerProcess(["--model-repository", str(base / "repository"), "--model-control-mode", "explicit",
                            "--load-model", "text_upper", "--allow-sagemaker", "true", "--sagemaker-port", "0",
                            "--sagemaker-address", "127.0.0.1"], env={"PYTRITON_SAGEMAKER_MODELS_ROOT": str(root)})
    try:
        yield platform_port(server, "Sagemaker HTTPService"), root, base
    finally:
        code = server.stop()
        assert code == 0, f"server exited with {code}; log:\n{server.log}"


def _load(port: int, name: str, url: str) -> tuple[int, bytes]:
    status, _, body = request(port, "POST", "/models", json.dumps({"model_name": name, "url": url}).encode())
    return status, body


def test_unload_with_another_target_unloads_only_its_own_model(mme: tuple[int, Path, Path]) -> None:
    port, root, _ = mme
    assert _load(port, "h1", str(root / "h1" / "model")) == (200, b"")
    try:
        status, _, body = request(port, "DELETE", "/models/h1", headers={TARGET: "text_upper"})
        assert (status, body) == (200, b"")
        # the repository's model is still served; h1 is gone (not listed, not invocable under any name)
        status, _, body = request(port, "POST", "/models/unknown/invoke", TEXT)
        assert status == 404
        assert request(port, "GET", "/models")[::2] == (200, b'{"models":[]}')
        assert _load(port, "h2", str(root / "h1" / "model"))[0] == 200  # its folder is free again
        status, _, body = request(port, "POST", "/models/h2/invoke", TEXT, {TARGET: "text_upper"})
        assert status == 200, body
        assert json.loads(body)["outputs"][0]["data"] == ["AB"]
        status, _, body = request(port, "POST", "/models/h2/invoke", add_sub_json([1, 2, 3, 4], [1, 1, 1, 1]),
                                  {TARGET: "h1"})
        assert status == 400 and b"h1" in body, body  # the model loaded as h1 was unloaded
    finally:
        request(port, "DELETE", "/models/h2")
        request(port, "DELETE", "/models/h1")


def test_url_through_a_symbolic_link_out_of_the_root_is_refused(mme: tuple[int, Path, Path]) -> None:
    port, root, base = mme
    status, body = _load(port, "h3", str(root / "link" / "model"))
    assert status == 400, body
    assert "leads out of" in json.loads(body)["error"]
    assert request(port, "GET", "/models")[::2] == (200, b'{"models":[]}')
    # a link that stays inside the root is followed
    os.symlink(root / "h1", root / "alias")
    try:
        assert _load(port, "h4", str(root / "alias" / "model")) == (200, b"")
        assert request(port, "DELETE", "/models/h4")[::2] == (200, b"")
    finally:
        os.unlink(root / "alias")
