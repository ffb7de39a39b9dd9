"""Prometheus metrics on the metrics port after known traffic: Triton's names and values, equal to the statistics."""

from __future__ import annotations

import concurrent.futures
import http.client
import re
import time
import urllib.parse

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from tests._support.metrics import SAMPLE_RE, samples, scrape
from tests._support.paths import REPO
from tests._support.serving import serve, serve_on_a_taken_port, tensor_args

REPOS = REPO / "tests" / "repositories"

TIMEOUT_S = 30
SUCCESS_BATCHES = [1, 2, 3, 1, 4]  # N = 5 successful requests, 11 inferences
FAILURES = 3  # M
COUNTERS = {  # metric -> (statistic, divisor)
    "nv_inference_request_success": ("success.count", 1),
    "nv_inference_request_failure": ("fail.count", 1),
    "nv_inference_count": ("inference_count", 1),
    "nv_inference_exec_count": ("execution_count", 1),
    "nv_inference_request_duration_us": ("success.ns", 1000),
    "nv_inference_queue_duration_us": ("queue.ns", 1000),
    "nv_inference_compute_input_duration_us": ("compute_input.ns", 1000),
    "nv_inference_compute_infer_duration_us": ("compute_infer.ns", 1000),
    "nv_inference_compute_output_duration_us": ("compute_output.ns", 1000),
}


@pytest.fixture(scope="module")
def identity_server():
    args = ["--max-batch-size", "8"] + tensor_args("input", [("IN_X", "fp32", "4")]) + tensor_args(
        "output", [("OUT_X", "fp32", "4")])
    with serve("tests.models:identity", *args) as server:
        yield server


@pytest.fixture(scope="module")
def raises_server():
    args = tensor_args("input", [("INPUT", "fp32", "4")]) + tensor_args("output", [("OUTPUT", "fp32", "4")])
    with serve("tests.models:raises", *args) as server:
        yield server


@pytest.fixture(scope="module")
def slow_server():
    args = tensor_args("input", [("X", "int32", "1")]) + tensor_args("output", [("PID", "int64", "1")])
    with serve("tests.models:slow_pid", *args) as server:
        yield server


@pytest.fixture(scope="module")
def traffic(identity_server, raises_server):
    """N successes (HTTP and gRPC, several batch sizes) on identity, M failures on raises."""
    with httpclient.InferenceServerClient(identity_server.http_url) as h, \
            grpcclient.InferenceServerClient(identity_server.grpc_url) as g:
        for i, batch in enumerate(SUCCESS_BATCHES):
            data = np.full((batch, 4), i, dtype=np.float32)
            if i % 2:
                x = grpcclient.InferInput("IN_X", [batch, 4], "FP32")
                x.set_data_from_numpy(data)
                result = g.infer("identity", [x], client_timeout=TIMEOUT_S)
            else:
                x = httpclient.InferInput("IN_X", [batch, 4], "FP32")
                x.set_data_from_numpy(data)
                result = h.infer("identity", [x])
            np.testing.assert_array_equal(result.as_numpy("OUT_X"), data)
    with httpclient.InferenceServerClient(raises_server.http_url) as h:
        for _ in range(FAILURES):
            x = httpclient.InferInput("INPUT", [4], "FP32")
            x.set_data_from_numpy(np.zeros(4, dtype=np.float32))
            with pytest.raises(InferenceServerException):
                h.infer("raises", [x])
    return identity_server, raises_server


def model_value(values: dict, name: str, model: str, version: str = "1", **labels: str) -> float:
    """The sample of `name` for the model version, summed over its other labels (e.g. a failure's reason) unless
    given."""
    found = [v for (n, ls), v in values.items() if n == name and
             {**dict(ls), "model": model, "version": version, **labels}.items() <= dict(ls).items()]
    if not found:
        raise KeyError((name, model, version, labels))
    return sum(found)


def statistic(stats: dict, key: str) -> int:
    if "." in key:
        name, field = key.split(".")
        return stats["inference_stats"][name][field]
    return stats[key]


def stats_of(server, model: str) -> dict:
    with httpclient.InferenceServerClient(server.http_url) as c:
        (entry,) = c.get_inference_statistics(model)["model_stats"]
    return entry


def test_success_and_failure_counts(traffic):
    identity_server, raises_server = traffic
    ok = samples(scrape(identity_server, TIMEOUT_S))
    bad = samples(scrape(raises_server, TIMEOUT_S))
    assert model_value(ok, "nv_inference_request_success", "identity") == len(SUCCESS_BATCHES)
    assert model_value(ok, "nv_inference_request_failure", "identity") == 0
    assert model_value(ok, "nv_inference_count", "identity") == sum(SUCCESS_BATCHES)
    assert model_value(ok, "nv_inference_exec_count", "identity") == len(SUCCESS_BATCHES)
    assert model_value(bad, "nv_inference_request_success", "raises") == 0
    assert model_value(bad, "nv_inference_request_failure", "raises") == FAILURES
    assert model_value(bad, "nv_inference_request_failure", "raises", reason="BACKEND") == FAILURES  # it raised
    assert model_value(bad, "nv_inference_exec_count", "raises") == FAILURES  # (executions all the same, as Triton's)
    assert model_value(bad, "nv_inference_count", "raises") == 0


def test_exact_lines(traffic):
    """The lines as Triton prints them (integers without a fractional part, labels model then version)."""
    identity_server, raises_server = traffic
    text = scrape(identity_server, TIMEOUT_S)
    assert f'nv_inference_request_success{{model="identity",version="1"}} {len(SUCCESS_BATCHES)}\n' in text
    for reason in ("BACKEND", "CANCELED", "OTHER", "REJECTED"):  # Triton's failure reasons, each with its sample
        assert f'nv_inference_request_failure{{model="identity",reason="{reason}",version="1"}} 0\n' in text
    assert f'nv_inference_count{{model="identity",version="1"}} {sum(SUCCESS_BATCHES)}\n' in text
    assert "# TYPE nv_inference_request_success counter\n" in text
    assert "# TYPE nv_inference_pending_request_count gauge\n" in text
    assert f'nv_inference_request_failure{{model="raises",reason="BACKEND",version="1"}} {FAILURES}\n' in \
        scrape(raises_server, TIMEOUT_S)


def test_format_parses_as_prometheus_text(traffic):
    """Every sample belongs to a family whose TYPE line names it (counters carry no `_total` in HELP/TYPE)."""
    identity_server, _ = traffic
    text = scrape(identity_server, TIMEOUT_S)
    declared = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = SAMPLE_RE.match(line).group(1)
            assert name in declared, f"sample {name} has no TYPE line"
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in COUNTERS:
        assert families[name].type == "counter", name
    for name in ("nv_inference_pending_request_count", "pytriton_model_instance_up", "nv_cpu_utilization"):
        assert families[name].type == "gauge", name


def test_durations_present_and_positive(traffic):
    identity_server, _ = traffic
    ok = samples(scrape(identity_server, TIMEOUT_S))
    for name in COUNTERS:
        if name.endswith("_duration_us"):
            assert model_value(ok, name, "identity") >= 0, name
    assert model_value(ok, "nv_inference_request_duration_us", "identity") > 0
    assert model_value(ok, "nv_inference_compute_infer_duration_us", "identity") > 0
    request_us = model_value(ok, "nv_inference_request_duration_us", "identity")
    parts_us = sum(model_value(ok, f"nv_inference_{p}_duration_us", "identity")
                   for p in ("queue", "compute_input", "compute_infer", "compute_output"))
    assert parts_us <= request_us + 4  # the parts fit in the whole (each truncated to whole microseconds)


def test_counters_equal_statistics(traffic):
    for server, model in zip(traffic, ("identity", "raises")):
        values = samples(scrape(server, TIMEOUT_S))
        stats = stats_of(server, model)
        for name, (key, divisor) in COUNTERS.items():
            assert model_value(values, name, model) == statistic(stats, key) // divisor, name


def test_instance_and_cpu_gauges(traffic):
    identity_server, _ = traffic
    values = samples(scrape(identity_server, TIMEOUT_S))
    up = {labels: v for (name, labels), v in values.items() if name == "pytriton_model_instance_up"}
    assert up == {(("gpu", ""), ("gpu_uuid", ""), ("instance", "identity_0_0"), ("kind", "KIND_CPU"),
                   ("model", "identity"), ("version", "1")): 1}
    assert model_value(values, "nv_inference_pending_request_count", "identity") == 0
    cpu = values[("nv_cpu_utilization", ())]
    assert 0 <= cpu <= 1
    assert values[("nv_cpu_memory_total_bytes", ())] >= values[("nv_cpu_memory_used_bytes", ())] > 0


def test_pending_request_count(slow_server):
    """Requests waiting for the one busy instance show as pending, and the gauge returns to 0."""

    def one(i):
        with grpcclient.InferenceServerClient(slow_server.grpc_url) as c:
            x = grpcclient.InferInput("X", [1], "INT32")
            x.set_data_from_numpy(np.array([i], dtype=np.int32))
            return c.infer("slow_pid", [x], parameters={"sleep": 0.4}, client_timeout=TIMEOUT_S)

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(one, i) for i in range(6)]
        highest = 0
        deadline = time.monotonic() + 10
        while not all(f.done() for f in futures) and time.monotonic() < deadline:
            values = samples(scrape(slow_server, TIMEOUT_S))
            highest = max(highest, model_value(values, "nv_inference_pending_request_count", "slow_pid"))
            time.sleep(0.05)
        for f in futures:
            f.result(timeout=TIMEOUT_S)
    assert highest >= 1
    values = samples(scrape(slow_server, TIMEOUT_S))
    assert model_value(values, "nv_inference_pending_request_count", "slow_pid") == 0
    assert model_value(values, "nv_inference_request_success", "slow_pid") == 6
    assert values[("nv_inference_queue_duration_us", (("model", "slow_pid"), ("version", "1")))] > 0


def test_metrics_endpoint_routes(identity_server):
    url = urllib.parse.urlparse(identity_server.metrics_url)
    for method, path, status in (("GET", "/metrics/", 200), ("POST", "/metrics", 405), ("GET", "/v2", 404),
                                 ("GET", "/", 404)):
        conn = http.client.HTTPConnection(url.netloc, timeout=TIMEOUT_S)
        conn.request(method, path)
        response = conn.getresponse()
        body = response.read()
        assert response.status == status, (method, path)
        if status == 405:
            assert body == b'{"error":"Method Not Allowed"}'
        elif status == 404:
            assert body == b'{"error":"Not Found"}'
        conn.close()


def test_a_taken_metrics_port_is_reported_as_the_metrics_port():
    """It was reported as "cannot listen for HTTP on ...", sending the user to the wrong option."""
    result, port = serve_on_a_taken_port(
        "tests.models:identity", "--max-batch-size", "0", *tensor_args("input", [("IN_FP32", "fp32", "-1")]),
        *tensor_args("output", [("OUT_FP32", "fp32", "-1")]), "--grpc-port", "0", "--http-port", "0",
        "--metrics-address", "127.0.0.1", "--metrics-port", "{port}")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"cannot listen for metrics on 127.0.0.1:{port}" in output
    assert "in flight" not in output


def readiness(server) -> dict[str, float]:
    """pytriton_model_ready by model (version 1 each)."""
    return {dict(labels)["model"]: value for (name, labels), value in samples(scrape(server, TIMEOUT_S)).items()
            if name == "pytriton_model_ready" and dict(labels)["version"] == "1"}


def test_model_ready_gauge_of_a_model_that_failed_to_load_at_start(tmp_path):
    """pytriton_model_ready says what the model ready endpoint says: 1 for the model that serves, 0 for the one left
    out because it failed to load (exit on error off)."""
    (tmp_path / "add_sub").symlink_to(REPOS / "models" / "add_sub")
    (tmp_path / "init_fails").symlink_to(REPOS / "broken_init" / "init_fails")
    with serve("--model-repository", str(tmp_path), "--exit-on-error", "false") as server:
        with httpclient.InferenceServerClient(server.http_url) as client:
            assert client.is_model_ready("add_sub") and not client.is_model_ready("init_fails")
        assert readiness(server) == {"add_sub": 1, "init_fails": 0}
        assert "# TYPE pytriton_model_ready gauge\n" in scrape(server, TIMEOUT_S)


def test_model_ready_gauge_follows_loads_and_unloads(tmp_path):
    """Explicit model control: a failed load shows as 0, an unload on request removes the model's sample (no alert
    for a model taken out on purpose), a load that succeeds shows as 1."""
    (tmp_path / "add_sub").symlink_to(REPOS / "models" / "add_sub")
    (tmp_path / "init_fails").symlink_to(REPOS / "broken_init" / "init_fails")
    with serve("--model-repository", str(tmp_path), "--model-control-mode", "explicit",
               "--load-model", "add_sub") as server, httpclient.InferenceServerClient(server.http_url) as client:
        assert readiness(server) == {"add_sub": 1}
        with pytest.raises(InferenceServerException, match="weights file missing"):
            client.load_model("init_fails")
        assert readiness(server) == {"add_sub": 1, "init_fails": 0}
        client.unload_model("add_sub")
        assert readiness(server) == {"init_fails": 0}
        client.load_model("add_sub")
        assert readiness(server) == {"add_sub": 1, "init_fails": 0}
