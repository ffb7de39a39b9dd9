"""Several versions of one repository model served at once (tests/repositories/versions/multi: version folders 1, 2
and 3, each answering X + 100 * its version): inference per version and by default, Triton's unknown-version error,
metadata, readiness, config, statistics, metrics and index entries per version (gRPC and HTTP with tritonclient);
policies latest 2 and specific; explicit unload of every version; poll mode starting a new version folder, stopping a
removed one, and retiring the old version under `latest 1` without dropping the request it runs."""

from __future__ import annotations

import shutil
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve
from tests._support.waits import holds_within

MULTI = REPO / "tests" / "repositories" / "versions" / "multi"


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(MULTI.parent)) as s:
        yield s


def ask(client, protocol: str, version: str = "", x: int = 1, **kwargs):
    tensor = CLIENTS[protocol].InferInput("X", [1], "INT32")
    tensor.set_data_from_numpy(np.array([x], dtype=np.int32))
    return client.infer("multi", [tensor], model_version=version, **kwargs)


def answer(client, protocol: str, version: str = "", x: int = 1) -> int:
    return int(ask(client, protocol, version, x).as_numpy("VERSION")[0])


def index(client, protocol: str) -> list[dict]:
    if protocol == "grpc":
        return client.get_model_repository_index(as_json=True).get("models", [])
    return client.get_model_repository_index()


def entries(client, protocol: str, name: str = "multi") -> dict[str, tuple[str, str]]:
    """The index entries of `name` by version: (state, reason)."""
    return {m["version"]: (m["state"], m.get("reason", "")) for m in index(client, protocol)
            if m["name"] == name and "version" in m}


def metadata(client, protocol: str, version: str = "") -> dict:
    if protocol == "grpc":
        return client.get_model_metadata("multi", version, as_json=True)
    return client.get_model_metadata("multi", version)


def statistics(client, protocol: str, name: str = "multi", version: str = "") -> list[dict]:
    if protocol == "grpc":
        return client.get_inference_statistics(name, version, as_json=True)["model_stats"]
    return client.get_inference_statistics(name, version)["model_stats"]


def copy_multi(root: Path, policy: str, versions: tuple[int, ...] = (1, 2, 3)) -> Path:
    """A copy of `multi` with `policy` and only the version folders `versions`."""
    model = root / "multi"
    model.mkdir(parents=True)
    (model / "config.pbtxt").write_text((MULTI / "config.pbtxt").read_text().replace("all { }", policy))
    for version in versions:
        shutil.copytree(MULTI / str(version), model / str(version), ignore=shutil.ignore_patterns("__pycache__"))
    return model


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_each_version_answers_and_the_default_is_the_latest(server, protocol):
    client = client_for(server, protocol)
    assert [answer(client, protocol, v) for v in ("1", "2", "3")] == [101, 201, 301]
    result = ask(client, protocol)
    assert int(result.as_numpy("VERSION")[0]) == 301
    assert result.get_response(**({"as_json": True} if protocol == "grpc" else {}))["model_version"] == "3"
    with pytest.raises(InferenceServerException, match="Request for unknown model: 'multi' version 7 is not found"):
        ask(client, protocol, "7")


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_metadata_ready_and_config_per_version(server, protocol):
    client = client_for(server, protocol)
    assert metadata(client, protocol)["versions"] == ["1", "2", "3"]
    assert metadata(client, protocol, "2")["versions"] == ["2"]  # as Triton: the version asked for
    with pytest.raises(InferenceServerException, match="'multi' version 7 is not found"):
        metadata(client, protocol, "7")
    assert all(client.is_model_ready("multi", v) for v in ("", "1", "2", "3"))
    assert not client.is_model_ready("multi", "7")
    for version in ("1", "3"):
        config = client.get_model_config("multi", version, **({"as_json": True} if protocol == "grpc" else {}))
        config = config["config"] if protocol == "grpc" else config
        assert config["name"] == "multi" and config["version_policy"] == {"all": {}}
    with pytest.raises(InferenceServerException, match="'multi' version 7 is not found"):
        client.get_model_config("multi", "7")


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_statistics_metrics_and_index_per_version(server, protocol):
    client = client_for(server, protocol)
    before = {s["version"]: int(s.get("inference_count", 0)) for s in statistics(client, protocol)}
    assert sorted(before) == ["1", "2", "3"]
    for _ in range(2):
        answer(client, protocol, "2")
    answer(client, protocol, "1")
    after = {s["version"]: int(s.get("inference_count", 0)) for s in statistics(client, protocol)}
    assert {v: after[v] - before[v] for v in after} == {"1": 1, "2": 2, "3": 0}
    [only] = statistics(client, protocol, version="2")
    assert (only["name"], only["version"], int(only.get("inference_count", 0))) == ("multi", "2", after["2"])
    every = [(s["name"], s["version"]) for s in statistics(client, protocol, name="")]
    assert every == [("multi", "1"), ("multi", "2"), ("multi", "3")]
    with pytest.raises(InferenceServerException, match="requested model version is not available for model 'multi'"):
        statistics(client, protocol, version="7")

    metrics = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    for version, count in after.items():
        assert f'nv_inference_request_success{{model="multi",version="{version}"}} {count}' in metrics

    assert entries(client, protocol) == {"1": ("READY", ""), "2": ("READY", ""), "3": ("READY", "")}


@pytest.mark.parametrize(("policy", "served", "missing"), [
    ("latest { num_versions: 2 }", ["2", "3"], "1"),
    ("specific { versions: [ 3, 1 ] }", ["1", "3"], "2"),
])
def test_latest_two_and_specific_policies(tmp_path, policy, served, missing):
    copy_multi(tmp_path, policy)
    with serve("--model-repository", str(tmp_path)) as s:
        client = client_for(s, "grpc")
        assert metadata(client, "grpc")["versions"] == served
        assert [answer(client, "grpc", v) for v in served] == [int(v) * 100 + 1 for v in served]
        assert answer(client, "grpc") == 301
        with pytest.raises(InferenceServerException, match=f"'multi' version {missing} is not found"):
            ask(client, "grpc", missing)
        assert not client.is_model_ready("multi", missing)
        assert entries(client_for(s, "http"), "http") == {v: ("READY", "") for v in served}


def test_explicit_load_and_unload_act_on_every_version(tmp_path):
    copy_multi(tmp_path, "all { }")
    with serve("--model-repository", str(tmp_path), "--model-control-mode", "explicit") as s:
        client = client_for(s, "http")
        assert [m for m in index(client, "http") if m["name"] == "multi"] == [{"name": "multi"}]
        client.load_model("multi")
        assert entries(client, "http") == {"1": ("READY", ""), "2": ("READY", ""), "3": ("READY", "")}
        assert [answer(client, "http", v) for v in ("1", "2", "3")] == [101, 201, 301]
        grpc_client = client_for(s, "grpc")
        grpc_client.unload_model("multi")
        assert entries(grpc_client, "grpc") == {v: ("UNAVAILABLE", "unloaded") for v in ("1", "2", "3")}
        assert not any(client.is_model_ready("multi", v) for v in ("", "1", "2", "3"))
        with pytest.raises(InferenceServerException, match="requested model 'multi' is not available"):
            statistics(client, "http")


def test_poll_starts_a_new_version_and_stops_a_removed_one(tmp_path):
    model = copy_multi(tmp_path, "all { }", (1, 2))
    with serve("--model-repository", str(tmp_path), "--model-control-mode", "poll", "--repository-poll-secs",
               "1") as s:
        client = client_for(s, "grpc")
        assert answer(client, "grpc", "1") == 101
        shutil.copytree(MULTI / "3", model / "3", ignore=shutil.ignore_patterns("__pycache__"))
        assert holds_within(lambda: entries(client, "grpc").get("3") == ("READY", ""))
        assert answer(client, "grpc") == 301 and metadata(client, "grpc")["versions"] == ["1", "2", "3"]
        # versions 1 and 2 served on without a reload: their statistics were kept
        assert int(statistics(client, "grpc", version="1")[0].get("inference_count", 0)) == 1

        shutil.rmtree(model / "1")
        assert holds_within(lambda: entries(client, "grpc").get("1") == ("UNAVAILABLE", "unloaded"))
        with pytest.raises(InferenceServerException, match="'multi' version 1 is not found"):
            ask(client, "grpc", "1")
        assert answer(client, "grpc", "2") == 201
        assert metadata(client, "grpc")["versions"] == ["2", "3"]


def test_poll_under_latest_one_retires_the_old_version_after_its_request(tmp_path):
    model = copy_multi(tmp_path, "latest { num_versions: 1 }", (1,))
    release = tmp_path / "release"
    with serve("--model-repository", str(tmp_path), "--model-control-mode", "poll", "--repository-poll-secs",
               "1") as s:
        client = client_for(s, "http")
        held: dict[str, int] = {}

        def held_request() -> None:
            held["answer"] = answer_with(client_for(s, "grpc"))

        def answer_with(grpc_client) -> int:
            result = ask(grpc_client, "grpc", parameters={"hold_until": str(release)})
            return int(result.as_numpy("VERSION")[0])

        thread = threading.Thread(target=held_request)
        thread.start()
        try:
            assert s.wait_for_log("multi version 1 holds a request")
            shutil.copytree(MULTI / "2", model / "2", ignore=shutil.ignore_patterns("__pycache__"))
            assert holds_within(lambda: entries(client, "http").get("2") == ("READY", ""))
            assert answer(client, "http") == 201  # new requests go to version 2 ...
            assert entries(client, "http")["1"] == ("UNLOADING", "")  # ... while version 1 finishes its request
        finally:
            release.touch()
            thread.join(30)
        assert held["answer"] == 101  # answered by version 1, not dropped
        assert holds_within(lambda: entries(client, "http").get("1") == ("UNAVAILABLE", "unloaded"))
        with pytest.raises(InferenceServerException, match="'multi' version 1 is not found"):
            ask(client, "http", "1")
