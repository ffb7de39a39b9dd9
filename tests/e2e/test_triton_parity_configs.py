"""Every model's configuration and metadata as tritonserver 2.51 shows them, for the test repositories whose models
the real server can load (written in Triton's own API): what it fills in (a dynamic batcher's preferred batch size,
an ensemble's transaction policy, instance group names) and what it leaves out (a strategy the config does not name,
fields newer than 2.51). Slow: it starts the real server once per repository (skipped where it is not installed)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests._support.paths import REPOSITORIES
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, asked_of_real_tritonserver
from tests._support.serving import serve

TIMEOUT_S = 30
# (the repositories whose models tritonserver 2.51 loads: their model.py files use only Triton's own API)
SHOWN = ["reshape", "batch_io", "sequence", "cache", "autocomplete", "outputs", "json_kinds", "triton_parity"]


def _get(http_url: str, path: str, body: bytes | None = None) -> Any:
    request = urllib.request.Request(f"http://{http_url}{path}", data=body, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return {"status": exc.code}


def _shown(http_url: str, _grpc_url: str = "") -> dict[str, Any]:
    """(config, metadata) of every ready model, by "name/version"."""
    out = {}
    for entry in _get(http_url, "/v2/repository/index", b"{}"):
        if entry.get("state") == "READY":
            name, version = entry["name"], entry.get("version", "")
            out[f"{name}/{version}"] = (_get(http_url, f"/v2/models/{name}/config"),
                                        _get(http_url, f"/v2/models/{name}/versions/{version}"))
    return out


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
@pytest.mark.parametrize("repository", SHOWN)
def test_every_model_shows_what_the_real_tritonserver_shows(repository):
    folder: Path = REPOSITORIES / repository
    args = ("--exit-on-error", "false")  # (triton_parity's init_fails fails to load on both: left out of the index)
    theirs = asked_of_real_tritonserver(folder, _shown, args)
    with serve("--model-repository", str(folder), *args) as server:
        ours = _shown(server.http_url)
    assert sorted(ours) == sorted(theirs)
    for model in theirs:
        assert ours[model] == theirs[model], model
