"""`pytriton serve` with Triton's --id, --exit-on-error, --strict-readiness, --allow-cpu-metrics and
--metrics-interval-ms, seen through tritonclient and the metrics port."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._support.metrics import scrape
from tests._support.paths import REPO
from tests._support.serving import serve

REPOS = REPO / "tests" / "repositories"
BROKEN = str(REPOS / "broken_init")


def test_lenient_start_not_strict_id_and_no_cpu_metrics():
    with serve("--model-repository", BROKEN, "--exit-on-error", "false", "--strict-readiness", "false",
               "--id", "cli-id", "--no-allow-cpu-metrics", "--metrics-interval-ms", "500") as server:
        http = httpclient.InferenceServerClient(server.http_url)
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        assert http.get_server_metadata()["name"] == "cli-id" and grpc.get_server_metadata().name == "cli-id"
        assert http.is_server_ready() and grpc.is_server_ready()
        assert not http.is_model_ready("init_fails") and not grpc.is_model_ready("init_fails")
        entry = http.get_model_repository_index()[0]
        assert (entry["name"], entry["version"], entry["state"]) == ("init_fails", "1", "UNAVAILABLE")
        assert "weights file missing for init_fails" in entry["reason"]
        assert "nv_cpu_" not in scrape(server)


def test_strict_readiness_by_default():
    with serve("--model-repository", BROKEN, "--exit-on-error", "false") as server:
        http = httpclient.InferenceServerClient(server.http_url)
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        assert http.is_server_live() and grpc.is_server_live()
        assert not http.is_server_ready() and not grpc.is_server_ready()
        assert http.get_server_metadata()["name"] == "triton"
        assert "\nnv_cpu_utilization " in scrape(server)


def refusing_repository(root):
    """add_sub (served), init_fails (its initialize raises), ac_raises (its auto_complete_config raises) and badcfg
    (a config.pbtxt that does not parse)."""
    (root / "add_sub").symlink_to(REPOS / "models" / "add_sub")
    (root / "init_fails").symlink_to(REPOS / "broken_init" / "init_fails")
    (root / "ac_raises").symlink_to(REPOS / "autocomplete_errors" / "ac_raises")
    (root / "badcfg" / "1").mkdir(parents=True)
    (root / "badcfg" / "1" / "model.py").write_text("")
    (root / "badcfg" / "config.pbtxt").write_text('name: "badcfg" backend: "python" max_batch_size: nope\n')
    return str(root)


def test_mode_none_without_exit_on_error_serves_the_models_that_load(tmp_path):
    # As tritonserver 2.51 with --exit-on-error=false: a model whose configuration cannot be read or completed is
    # left out like one whose initialize() raised, and the others are served (before, the start stopped at it).
    with serve("--model-repository", refusing_repository(tmp_path), "--exit-on-error", "false") as server:
        http = httpclient.InferenceServerClient(server.http_url)
        assert http.is_server_live() and not http.is_server_ready()
        assert http.is_model_ready("add_sub")
        for name in ("init_fails", "ac_raises", "badcfg"):
            assert not http.is_model_ready(name), name
        index = http.get_model_repository_index()
        assert [entry["name"] for entry in index] == ["ac_raises", "add_sub", "badcfg", "init_fails"]  # Triton's order
        by_name = {entry["name"]: entry for entry in index}
        assert by_name["badcfg"] == {"name": "badcfg"}  # (Triton: "Poll failed for model directory", no state)
        assert (by_name["ac_raises"]["version"], by_name["ac_raises"]["state"]) == ("1", "UNAVAILABLE")
        assert "auto_complete_config of model 'ac_raises'" in by_name["ac_raises"]["reason"]
        with pytest.raises(InferenceServerException, match="'ac_raises' has no available versions"):
            http.get_model_metadata("ac_raises")
        with pytest.raises(InferenceServerException, match="'badcfg' is not found"):
            http.get_model_metadata("badcfg")
        inputs = [httpclient.InferInput(name, [1, 4], "FP32") for name in ("INPUT0", "INPUT1")]
        inputs[0].set_data_from_numpy(np.array([[1, 2, 3, 4]], dtype=np.float32))
        inputs[1].set_data_from_numpy(np.array([[4, 3, 2, 1]], dtype=np.float32))
        assert http.infer("add_sub", inputs).as_numpy("OUTPUT0").tolist() == [[5, 5, 5, 5]]
    assert "model 'badcfg' failed to load and is UNAVAILABLE (exit on error is off)" in server.log


def test_mode_none_with_exit_on_error_stops_at_a_configuration_it_cannot_read(tmp_path):
    args = ["-m", "pytriton.cli", "serve", "--model-repository", refusing_repository(tmp_path), "--grpc-port", "0",
            "--http-port", "0", "--metrics-port", "0"]
    result = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode != 0 and "ac_raises" in result.stderr, result.stderr


def test_explicit_mode_exit_on_error_and_a_failed_load_under_strict_readiness(tmp_path):
    (tmp_path / "init_fails").symlink_to(REPOS / "broken_init" / "init_fails")
    (tmp_path / "add_sub").symlink_to(REPOS / "models" / "add_sub")
    args = ["-m", "pytriton.cli", "serve", "--model-repository", str(tmp_path), "--model-control-mode", "explicit",
            "--load-model", "init_fails", "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0",
            "--grpc-address", "127.0.0.1", "--http-address", "127.0.0.1", "--metrics-address", "127.0.0.1"]
    result = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode != 0
    assert "failed to load all models" in result.stderr and "weights file missing for init_fails" in result.stderr
    with serve("--model-repository", str(tmp_path), "--model-control-mode", "explicit",
               "--load-model", "add_sub") as server:
        http = httpclient.InferenceServerClient(server.http_url)
        assert http.is_server_ready()
        with pytest.raises(InferenceServerException, match="weights file missing"):
            http.load_model("init_fails")
        assert not http.is_server_ready()  # Triton's strict readiness: a model that failed to load is not ready


def test_help_shows_tritons_option_names():
    result = subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", "--help"], cwd=REPO, capture_output=True,
                            text=True, timeout=60, check=True)
    for option in ("--id", "--exit-on-error", "--strict-readiness", "--allow-cpu-metrics", "--metrics-interval-ms",
                   "--exit-timeout-secs", "--model-repository", "--allow-gpu-metrics", "--metrics-config"):
        assert option in result.stdout, option


def test_log_file_takes_the_log(tmp_path):
    log = tmp_path / "server.log"
    process = subprocess.Popen([sys.executable, "-m", "pytriton.cli", "serve", "tests.models:add_sub", "--input",
                                "a:fp32:-1", "--input", "b:fp32:-1", "--output", "add:fp32:-1", "--output",
                                "sub:fp32:-1", "--log-file", str(log), "--grpc-port", "0", "--http-port", "0",
                                "--metrics-port", "0", "--grpc-address", "127.0.0.1", "--http-address", "127.0.0.1",
                                "--metrics-address", "127.0.0.1"], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTRITON_EXIT_WITH_PARENT": "1"})
    try:
        deadline = time.monotonic() + 60
        port = None
        while port is None and time.monotonic() < deadline and process.poll() is None:
            found = re.search(r"Started HTTPService at [^:]+:(\d+)", log.read_text() if log.exists() else "")
            port = int(found.group(1)) if found else None
            time.sleep(0.05)
        assert port is not None, log.read_text() if log.exists() else "no log file"
        assert httpclient.InferenceServerClient(f"127.0.0.1:{port}").is_server_live()
        assert "model instance 'add_sub_0_0' started" in log.read_text()  # the supervisor's line, workers started
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0
    assert "Started HTTPService" not in stderr  # nothing of the server's log on standard error
    assert "pytriton server stopped" in log.read_text()
