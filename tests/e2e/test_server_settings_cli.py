"""`pytriton serve` with Triton's --id, --exit-on-error, --strict-readiness, --allow-cpu-metrics and
--metrics-interval-ms, seen through tritonclient and the metrics port."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

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
