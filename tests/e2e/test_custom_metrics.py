"""Custom metrics of Python-backend models (`pb_utils.MetricFamily`): a model with two instances updates a counter, a
gauge and a histogram per request; /metrics shows them as Triton prints them, `value()` reads back what the server
holds (both instances add to one metric), misuses fail the request with Triton's wording, a killed instance leaves the
values intact, and an unload (explicit mode) takes the model's metrics away. Checked with tritonclient gRPC and HTTP."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, client_for
from tests._support.metrics import scrape
from tests._support.paths import REPO
from tests._support.serving import serve

REPOS = REPO / "tests" / "repositories"


def custom_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"(# (HELP|TYPE) )?metered_", line)]


def infer(client, protocol: str, x: list[float], parameters: dict | None = None):
    tensor = CLIENTS[protocol].InferInput("X", [len(x)], "FP32")
    tensor.set_data_from_numpy(np.array(x, np.float32))
    return client.infer("metered", [tensor], parameters=parameters)


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPOS / "metrics")) as server:
        yield server


def test_created_metrics_show_at_zero_before_any_request():
    with serve("--model-repository", str(REPOS / "metrics")) as server:
        assert custom_lines(scrape(server)) == [
            "# HELP metered_requests_total Requests seen by metered",
            "# TYPE metered_requests_total counter",
            'metered_requests_total{model="metered",unit="requests"} 0',
            "# HELP metered_elements_total Input elements seen by metered",
            "# TYPE metered_elements_total counter",
            'metered_elements_total{model="metered"} 0',
            "# HELP metered_last_sum Sum of the last input of metered",
            "# TYPE metered_last_sum gauge",
            'metered_last_sum{model="metered"} 0',
            "# HELP metered_values Input values of metered",
            "# TYPE metered_values histogram",
            'metered_values_count{model="metered"} 0',
            'metered_values_sum{model="metered"} 0',
            'metered_values_bucket{model="metered",le="1"} 0',
            'metered_values_bucket{model="metered",le="2.5"} 0',
            'metered_values_bucket{model="metered",le="10"} 0',
            'metered_values_bucket{model="metered",le="+Inf"} 0',
        ]


def test_values_after_requests_over_both_protocols(server):
    before = custom_lines(scrape(server))
    requests_before = int(_sample(before, 'metered_requests_total{model="metered",unit="requests"}'))
    inputs = [[0.5, 2.0, 20.0], [1.0], [3.0, 3.0], [9.5, 0.25]]
    for i, x in enumerate(inputs):
        protocol = "grpc" if i % 2 == 0 else "http"
        result = infer(client_for(server, protocol), protocol, x)
        # value() is the server's value: both instances count into the one metric
        assert result.as_numpy("REQUESTS").tolist() == [requests_before + i + 1]
        assert result.as_numpy("LAST_SUM").tolist() == [float(np.float32(sum(x)))]
    lines = custom_lines(scrape(server))
    assert _sample(lines, 'metered_requests_total{model="metered",unit="requests"}') == str(requests_before + 4)
    values = [v for x in inputs for v in x]
    if requests_before == 0:  # (this module's server: exact histogram lines)
        assert 'metered_elements_total{model="metered"} 8' in lines
        assert 'metered_last_sum{model="metered"} 9.75' in lines
        assert lines[-6:] == [
            'metered_values_count{model="metered"} 8',
            f'metered_values_sum{{model="metered"}} {_g(sum(values))}',
            'metered_values_bucket{model="metered",le="1"} 3',
            'metered_values_bucket{model="metered",le="2.5"} 4',
            'metered_values_bucket{model="metered",le="10"} 7',
            'metered_values_bucket{model="metered",le="+Inf"} 8',
        ]


def _g(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _sample(lines: list[str], head: str) -> str:
    found = [line[len(head) + 1:] for line in lines if line.startswith(head + " ")]
    assert len(found) == 1, (head, lines)
    return found[0]


# The checks that Triton makes in its parent process: (what failed, why); the error names the instance in between.
REFUSALS = {
    "negative_increment": ("Failed to increment metric value", ("TRITONSERVER_METRIC_KIND_COUNTER can only be "
                                                                "incremented monotonically by non-negative values.")),
    "set_counter": ("Failed to set metric value", "TRITONSERVER_METRIC_KIND_COUNTER does not support Set"),
    "observe_gauge": ("Failed to observe metric value", "TRITONSERVER_METRIC_KIND_GAUGE does not support Observe"),
    "increment_histogram": ("Failed to increment metric value",
                            "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Increment"),
    "value_histogram": ("Failed to get metric value", "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Value"),
    "kind_clash": ("Error when creating MetricFamily", "Family name already exists with different type"),
    "bad_name": ("Error when creating MetricFamily", "Invalid metric name"),
    "bad_label": ("Error when creating Metric", "Invalid label name"),
    # (pytriton's own check: Triton merges such a family into its own, letting the model forge its counters)
    "server_name": ("Error when creating MetricFamily", "Invalid metric name: 'nv_inference_count' is in the "
                    "namespace of the server's own metrics"),
    "unsorted_buckets": ("Error when creating Metric", "Bucket Boundaries must be strictly sorted"),
}
# The checks that Triton's stub makes itself.
MISUSES = {
    "labels_not_dict": "Failed to create metric. Labels must be a dictionary.",
    "missing_buckets": "Failed to create metric. Missing required buckets.",
    "unexpected_buckets": "Failed to create metric. Unexpected buckets found.",
}


def expected_error(misuse: str) -> str:
    """A regular expression of the error the client gets (as real Triton 2.51 words it, checked with tritonserver)."""
    if misuse in MISUSES:
        return re.escape(MISUSES[misuse])
    what, why = REFUSALS[misuse]
    return (re.escape(f"{what}: Failed to process the request for model '") + r"metered_0_[01]"
            + re.escape(f"', message: {why}"))


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_misuse_fails_the_request_with_tritons_words(server, protocol):
    client = client_for(server, protocol)
    for misuse in [*REFUSALS, *MISUSES]:
        with pytest.raises(InferenceServerException) as info:
            infer(client, protocol, [1.0], parameters={"misuse": misuse})
        assert re.search(expected_error(misuse), info.value.message()), (misuse, info.value.message())
    before = custom_lines(scrape(server))
    infer(client, protocol, [1.0])  # the model and its metrics carry on
    after = custom_lines(scrape(server))
    head = 'metered_requests_total{model="metered",unit="requests"}'
    assert int(_sample(after, head)) == int(_sample(before, head)) + 1
    assert not [line for line in after if "0metered" in line or 'other="1"' in line]  # nothing half-made


def test_a_model_cannot_forge_or_break_the_servers_own_metrics():
    """A family named like one of the server's (nv_*, pytriton_*) would print a second HELP/TYPE for that name, which
    Prometheus refuses (the whole scrape is lost), and would add to the server's own samples."""
    with serve("--model-repository", str(REPOS / "metrics")) as server:
        client = client_for(server, "http")
        with pytest.raises(InferenceServerException, match="Invalid metric name: 'nv_inference_count'"):
            infer(client, "http", [1.0], parameters={"misuse": "server_name"})
        infer(client, "http", [1.0])
        text = scrape(server)
        types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
        assert sorted(types) == sorted(set(types)), "a family name is printed twice"
        counts = [line for line in text.splitlines() if line.startswith('nv_inference_count{model="metered"')]
        # the refused request was answered with an error response, which Triton counts as an inference (a success of
        # the backend), and the ordinary one: 2, not the model's forged 1000 more
        assert counts == ['nv_inference_count{model="metered",version="1"} 2']


def test_killed_instance_leaves_the_values_and_its_restart_shares_them():
    with serve("--model-repository", str(REPOS / "metrics")) as server:
        client = client_for(server, "grpc")
        for _ in range(3):
            infer(client, "grpc", [1.0, 1.0])
        victim = server.worker_pids()[0]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while len(server.worker_pids()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.worker_pids()) == 3, server.log
        while not client.is_model_ready("metered") and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = custom_lines(scrape(server))
        assert 'metered_requests_total{model="metered",unit="requests"} 3' in lines  # held by the other instance
        for i in range(4):  # both instances (the restarted one too) add to the same values
            assert infer(client, "grpc", [2.0]).as_numpy("REQUESTS").tolist() == [4.0 + i]
        lines = custom_lines(scrape(server))
        assert 'metered_elements_total{model="metered"} 10' in lines
        assert 'metered_values_count{model="metered"} 10' in lines


def test_unload_takes_the_models_metrics_away(tmp_path: Path):
    shutil.copytree(REPOS / "metrics" / "metered", tmp_path / "metered")
    with serve("--model-repository", str(tmp_path), "--model-control-mode", "explicit",
               "--load-model", "metered") as server:
        client = client_for(server, "http")
        assert infer(client, "http", [4.0]).as_numpy("REQUESTS").tolist() == [1.0]
        assert len(custom_lines(scrape(server))) == 17
        client.unload_model("metered")  # (it returns once the instances have stopped)
        text = scrape(server)
        assert custom_lines(text) == []
        assert "# TYPE nv_inference_count counter" in text  # the server's own metrics are still there
        client.load_model("metered")  # a new start: the metrics come back from zero
        assert infer(client, "http", [4.0]).as_numpy("REQUESTS").tolist() == [1.0]


@pytest.mark.parametrize("kind", ["counter", "histogram"])
def test_a_created_metric_is_on_metrics_when_its_creation_returns(kind):
    """As in Triton (whose `qa/python_models/custom_metrics` reads /metrics from inside execute right after making a
    metric): the model (tests/repositories/metrics_read/read_back) reads /metrics after each Metric() it makes, and
    finds each one's zero line there every time."""
    with serve("--model-repository", str(REPOS / "metrics_read")) as server, \
            grpcclient.InferenceServerClient(server.grpc_url) as client:
        result = client.infer("read_back", [], parameters={"metrics_url": server.metrics_url, "count": 200,
                                                            "kind": kind})
        assert json.loads(result.as_numpy("MISSED")[0]) == []
