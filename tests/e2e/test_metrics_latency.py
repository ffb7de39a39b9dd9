"""`--metrics-config`: Triton's latency summaries (quantiles of known request timings), the first-response histogram of
decoupled models and counter_latencies=false."""

from __future__ import annotations

import numpy as np
import tritonclient.grpc as grpcclient
from prometheus_client.parser import text_string_to_metric_families

from tests._support.metrics import scrape
from tests._support.model_calls import stream_delayed_countdown
from tests._support.serving import serve, tensor_args

SLOW_ARGS = tensor_args("input", [("X", "int32", "1")]) + tensor_args("output", [("PID", "int64", "1")])
FAST_S, SLOW_S = 0.05, 0.25  # 8 requests take FAST_S, 2 take SLOW_S: p50 is a fast one, p90 and above slow ones
FAMILIES = ("request", "queue", "compute_input", "compute_infer", "compute_output")


def _infer(url: str, sleeps: list[float]) -> None:
    with grpcclient.InferenceServerClient(url) as client:
        for i, sleep in enumerate(sleeps):
            x = grpcclient.InferInput("X", [1], "INT32")
            x.set_data_from_numpy(np.array([i], dtype=np.int32))
            client.infer("slow_pid", [x], parameters={"sleep": sleep}, client_timeout=30)


def _families(server) -> dict:
    return {f.name: f for f in text_string_to_metric_families(scrape(server))}


def test_summary_quantiles_of_known_timings():
    with serve("tests.models:slow_pid", *SLOW_ARGS, "--metrics-config", "summary_latencies=true") as server:
        families = _families(server)
        request = families["nv_inference_request_summary_us"]
        assert request.type == "summary"
        assert {s.labels["quantile"] for s in request.samples if "quantile" in s.labels} == {
            "0.5", "0.9", "0.95", "0.99", "0.999"}  # Triton's default quantiles; no request yet: NaN
        assert all(np.isnan(s.value) for s in request.samples if "quantile" in s.labels)

        _infer(server.grpc_url, [FAST_S] * 8 + [SLOW_S] * 2)
        families = _families(server)
        for family in FAMILIES:
            metric = families[f"nv_inference_{family}_summary_us"]
            values = {(s.name, s.labels.get("quantile")): s.value for s in metric.samples}
            assert values[(f"nv_inference_{family}_summary_us_count", None)] == 10, family
        request = {s.labels.get("quantile"): s.value for s in families["nv_inference_request_summary_us"].samples
                   if s.labels.get("quantile")}
        infer = {s.labels.get("quantile"): s.value for s in families["nv_inference_compute_infer_summary_us"].samples
                 if s.labels.get("quantile")}
        for quantiles in (request, infer):
            assert FAST_S * 1e6 * 0.99 <= quantiles["0.5"] < FAST_S * 1e6 * 1.6, quantiles
            for q in ("0.9", "0.95", "0.99", "0.999"):
                assert SLOW_S * 1e6 * 0.99 <= quantiles[q] < SLOW_S * 1e6 * 1.3, quantiles
        assert request["0.5"] >= infer["0.5"] * 0.98  # the whole request includes its compute time

        # `_count` and `_sum` agree with the counters of the same duration, as in Triton.
        counters = families["nv_inference_request_duration_us"].samples[0].value
        summary = {s.name: s.value for s in families["nv_inference_request_summary_us"].samples}
        assert summary["nv_inference_request_summary_us_sum"] == counters
        assert summary["nv_inference_request_summary_us_count"] == families[
            "nv_inference_request_success"].samples[0].value == 10
        queue = {s.labels.get("quantile"): s.value for s in families["nv_inference_queue_summary_us"].samples
                 if s.labels.get("quantile")}
        assert queue["0.5"] < FAST_S * 1e6 / 2  # one client, one request at a time: nothing waits long


def test_custom_quantiles_and_no_latency_counters():
    args = ("--metrics-config", "summary_latencies=true", "--metrics-config", "summary_quantiles=0.25:0.01,1:0.001",
            "--metrics-config", "counter_latencies=false", "--metrics-config", "histogram_latencies=true")
    with serve("tests.models:slow_pid", *SLOW_ARGS, *args) as server:
        _infer(server.grpc_url, [FAST_S, FAST_S, FAST_S, SLOW_S])
        families = _families(server)
        assert not [name for name in families if name.endswith("_duration_us")]
        assert "nv_inference_first_response_histogram_ms" not in families  # as Triton: decoupled models only
        assert families["nv_inference_request_success"].samples[0].value == 4
        request = {s.labels.get("quantile"): s.value for s in families["nv_inference_request_summary_us"].samples
                   if s.labels.get("quantile")}
        assert set(request) == {"0.25", "1"}
        assert FAST_S * 1e6 * 0.99 <= request["0.25"] < FAST_S * 1e6 * 1.6
        assert SLOW_S * 1e6 * 0.99 <= request["1"] < SLOW_S * 1e6 * 1.3


def test_summaries_are_off_by_default():
    """As in Triton: without `summary_latencies=true` no summary is computed or exported."""
    with serve("tests.models:slow_pid", *SLOW_ARGS) as server:
        _infer(server.grpc_url, [0.0])
        families = _families(server)
        assert "nv_inference_request_duration_us" in families
        assert not [name for name in families if name.endswith("_summary_us")]


def test_first_response_histogram_of_a_decoupled_model():
    args = ["--decoupled", *tensor_args("input", [("COUNT", "int32", "1")]),
            *tensor_args("output", [("VALUE", "int32", "1")]), "--metrics-config", "histogram_latencies=true"]
    with serve("tests.models:delayed_countdown", *args) as server:
        # First responses after ~10 ms, ~300 ms and ~700 ms (then 2 more responses each); a request answered by
        # no response at all has no first response.
        stream_delayed_countdown(server.grpc_url, [(0.01, 3), (0.3, 3), (0.7, 3), (0.0, 0)])
        family = _families(server)["nv_inference_first_response_histogram_ms"]
        assert family.type == "histogram"
        values = {(s.name.rsplit("_", 1)[-1], s.labels.get("le")): s.value for s in family.samples}
        assert {le: v for (kind, le), v in values.items() if kind == "bucket"} == {
            "100": 1, "500": 2, "2000": 3, "5000": 3, "+Inf": 3}  # Triton's default buckets, cumulative
        assert values[("count", None)] == 3
        assert 1010 <= values[("sum", None)] < 1010 + 3 * 150  # whole milliseconds
        assert {s.labels["model"] for s in family.samples} == {"delayed_countdown"}
        assert "# TYPE nv_inference_first_response_histogram_ms histogram\n" in scrape(server)
