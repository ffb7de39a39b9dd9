"""Every TritonConfig field takes effect or says why not: the reference page lists them all from the one table of
reasons, and the fields that act are seen through tritonclient (server metadata name, readiness, repository index,
/metrics lines)."""

from __future__ import annotations

import dataclasses
import logging
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from pytriton.config import triton_config as _triton_config
from pytriton.config.triton_config_fields import FIELDS, IGNORED, reference_table
from pytriton.exceptions import PyTritonRuntimeError, PyTritonValidationError
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig, server_config
from tests._support.ports import FREE_PORTS
from tests.triton import models

REPO = Path(__file__).resolve().parents[2]
REPOSITORIES = REPO / "tests" / "repositories"
PAGE = REPO / "docs" / "guide" / "triton-config.md"


def test_every_field_is_in_the_table_and_the_page_shows_the_table():
    assert list(FIELDS) == [f.name for f in dataclasses.fields(TritonConfig)]  # a new field needs its row
    text = PAGE.read_text()
    assert reference_table() in text, "docs/guide/triton-config.md: paste `python -m pytriton.config.triton_config_fields`"
    assert "guide/triton-config.md" in (REPO / "mkdocs.yml").read_text()


def test_an_ignored_field_logs_its_reason_once(monkeypatch, caplog):
    monkeypatch.setattr(_triton_config, "_logged_ignored", set())
    with caplog.at_level(logging.WARNING, logger="pytriton.triton"):
        TritonConfig(http_thread_count=4, buffer_manager_thread_count=2)
        TritonConfig(http_thread_count=8)
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count(f"TritonConfig.http_thread_count is accepted but has no effect: "
                          f"{FIELDS['http_thread_count'].reason}") == 1
    assert any(m.startswith("TritonConfig.buffer_manager_thread_count is accepted") for m in messages)
    assert FIELDS["http_thread_count"].status == IGNORED


def _value_for(name: str):
    text = str({f.name: f.type for f in dataclasses.fields(TritonConfig)}[name])
    return (True if "bool" in text else 1 if "int" in text else Path("x") if "Path" in text
            else ["x"] if "list" in text else "x")


@pytest.mark.parametrize("name", [n for n, info in FIELDS.items() if info.status == IGNORED])
def test_every_ignored_field_is_accepted_and_logs_its_reason(name, monkeypatch, caplog):
    monkeypatch.setattr(_triton_config, "_logged_ignored", set())
    with caplog.at_level(logging.WARNING, logger="pytriton.triton"):
        config = TritonConfig(**{name: _value_for(name)})
    assert getattr(config, name) == _value_for(name)
    assert [r.getMessage() for r in caplog.records] == [
        f"TritonConfig.{name} is accepted but has no effect: {FIELDS[name].reason}"]


def test_applied_fields_log_nothing(monkeypatch, caplog):
    monkeypatch.setattr(_triton_config, "_logged_ignored", set())
    with caplog.at_level(logging.WARNING, logger="pytriton.triton"):
        TritonConfig(id="x", strict_readiness=False, exit_on_error=False, allow_cpu_metrics=False,
                     metrics_interval_ms=500, model_repository=REPOSITORIES / "models")
    assert not caplog.records


def test_bad_values_are_refused_naming_the_field(tmp_path):
    with pytest.raises(PyTritonValidationError, match="TritonConfig.model_repository: '.*nope' is not a directory"):
        TritonConfig(model_repository=tmp_path / "nope")
    with pytest.raises(PyTritonValidationError, match="metrics_interval_ms must be"):
        TritonConfig(metrics_interval_ms=0)


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """add_sub (works) and init_fails (its initialize raises) in one repository."""
    (tmp_path / "add_sub").symlink_to(REPOSITORIES / "models" / "add_sub")
    (tmp_path / "init_fails").symlink_to(REPOSITORIES / "broken_init" / "init_fails")
    return tmp_path


def bind_times2(triton: Triton) -> None:
    triton.bind("times2", models.times(2), inputs=[Tensor(name="values", shape=(1,), dtype=np.float32)],
                outputs=[Tensor(name="result", shape=(1,), dtype=np.float32)], config=ModelConfig(batching=False))


def clients(triton: Triton):
    return (httpclient.InferenceServerClient(f"127.0.0.1:{triton.ports['http']}"),
            grpcclient.InferenceServerClient(f"127.0.0.1:{triton.ports['grpc']}"))


def scrape(triton: Triton) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{triton.ports['metrics']}/metrics", timeout=10) as response:
        return response.read().decode()


def add_sub(client) -> np.ndarray:
    mod = httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient
    tensors = []
    for name in ("INPUT0", "INPUT1"):
        tensor = mod.InferInput(name, [1, 4], "FP32")
        tensor.set_data_from_numpy(np.arange(4, dtype=np.float32).reshape(1, 4))
        tensors.append(tensor)
    return client.infer("add_sub", tensors).as_numpy("OUTPUT0")


def test_repository_beside_bound_models_lenient_start_id_and_no_cpu_metrics(repository):
    config = TritonConfig(model_repository=repository, id="edge-7", exit_on_error=False, strict_readiness=False,
                          allow_cpu_metrics=False, metrics_config=["summary_latencies=true", "counter_latencies=false"],
                          **FREE_PORTS)
    with Triton(config=config) as triton:
        bind_times2(triton)
        http, grpc = clients(triton)
        assert http.get_server_metadata()["name"] == "edge-7"
        assert grpc.get_server_metadata().name == "edge-7"
        for client in (http, grpc):
            np.testing.assert_array_equal(add_sub(client), [[0, 2, 4, 6]])  # the repository's model
            assert client.is_model_ready("times2") and client.is_model_ready("add_sub")
            assert not client.is_model_ready("init_fails")
            assert client.is_server_ready()  # strict_readiness=False: ready although init_fails is not
        index = http.get_model_repository_index(headers={"triton-access-token": triton.get_access_token()})
        failed = {m["name"]: m for m in index}["init_fails"]
        assert failed["state"] == "UNAVAILABLE" and "weights file missing for init_fails" in failed["reason"]
        text = scrape(triton)
        assert 'nv_inference_request_success{model="add_sub",version="1"} 2' in text
        assert "nv_cpu_" not in text  # allow_cpu_metrics=False
        assert 'nv_inference_request_summary_us_count{model="add_sub",version="1"} 2' in text  # metrics_config
        assert "nv_inference_request_duration_us" not in text


def test_strict_readiness_by_default_and_triton_as_default_id(repository):
    with Triton(config=TritonConfig(model_repository=repository, exit_on_error=False, **FREE_PORTS)) as triton:
        bind_times2(triton)
        http, grpc = clients(triton)
        assert http.get_server_metadata()["name"] == "triton"
        for client in (http, grpc):
            assert client.is_server_live() and client.is_model_ready("times2")
            assert not client.is_server_ready()  # init_fails is not ready, so the server is not
        triton.bind("init_fails", models.times(2), inputs=[Tensor(name="values", shape=(1,), dtype=np.float32)],
                    outputs=[Tensor(name="result", shape=(1,), dtype=np.float32)], config=ModelConfig(batching=False))
        assert http.is_server_ready() and grpc.is_server_ready()  # a bound model of that name took its place
        with urllib.request.urlopen(f"http://127.0.0.1:{triton.ports['metrics']}/metrics", timeout=10) as response:
            assert "\nnv_cpu_utilization " in response.read().decode()  # allowed by default


def test_exit_on_error_by_default_a_model_that_fails_stops_the_start():
    triton = Triton(config=TritonConfig(model_repository=REPOSITORIES / "broken_init", **FREE_PORTS))
    with pytest.raises(PyTritonRuntimeError, match="weights file missing for init_fails"):
        triton.run()
    triton.stop()


def test_log_file_log_verbose_restrictions_and_allow_metrics(tmp_path):
    log = tmp_path / "server.log"
    config = TritonConfig(log_file=log, log_verbose=1, allow_metrics=False, exit_timeout_secs=5,
                          http_restricted_api="metadata:x-key=v", grpc_restricted_protocol="metadata:x-key=v",
                          **FREE_PORTS)
    with Triton(config=config) as triton:
        assert triton.ports["metrics"] is None  # allow_metrics=False: no metrics port
        http, grpc = clients(triton)
        with pytest.raises(InferenceServerException, match="restricted"):
            http.get_server_metadata()
        with pytest.raises(InferenceServerException, match="restricted"):
            grpc.get_server_metadata()
        assert http.get_server_metadata(headers={"x-key": "v"})["name"] == "triton"
        assert grpc.get_server_metadata(headers={"triton-grpc-protocol-x-key": "v"}).name == "triton"
    assert "pytriton server ready" in log.read_text()  # log_verbose=1: info lines, in the log file


def test_allow_grpc_false_serves_http_only():
    with Triton(config=TritonConfig(allow_grpc=False, **FREE_PORTS)) as triton:
        assert triton.ports["grpc"] is None
        assert clients(triton)[0].is_server_live()


@pytest.mark.parametrize("field, value, attribute, expected", [
    ("exit_timeout_secs", 7, "exit_timeout_s", 7.0),
    ("log_verbose", 2, "log_level", "DEBUG"),
    ("log_verbose", None, "log_level", "WARNING"),
    ("id", "a", "server_id", "a"),
    ("id", None, "server_id", "triton"),
    ("metrics_interval_ms", 250, "metrics_interval_ms", 250.0),
    ("metrics_interval_ms", None, "metrics_interval_ms", 2000.0),
    ("allow_cpu_metrics", False, "allow_cpu_metrics", False),
    ("exit_on_error", None, "exit_on_error", True),
    ("strict_readiness", None, "strict_readiness", True),
])
def test_server_config_carries_the_field(field, value, attribute, expected):
    config = server_config(TritonConfig(**{field: value}), TritonSecurityConfig())
    assert getattr(config, attribute) == expected
