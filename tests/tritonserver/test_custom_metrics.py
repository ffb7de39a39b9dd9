"""`tritonserver.MetricFamily` / `Metric`: custom metrics of the application, process-wide as in Triton, shown by
`Server.metrics()`; Triton's errors for a counter set or decremented and for a label that is not a string."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

import tritonserver

MODELS = str(Path(__file__).resolve().parent.parent / "repositories" / "models")


@pytest.fixture(scope="module")
def server():
    server = tritonserver.Server(model_repository=MODELS, exit_timeout=5, cpu_metrics=False, gpu_metrics=False,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT).start()
    yield server
    server.stop()


def test_a_family_and_its_metrics_show_in_server_metrics(server):
    family = tritonserver.MetricFamily(tritonserver.MetricKind.GAUGE, "app_queue_depth", "Requests queued by the app")
    metric = tritonserver.Metric(family, {"queue": "main"})
    metric.set_value(3)
    metric.increment(1.5)
    assert metric.value == 4.5 and metric.kind is tritonserver.MetricKind.GAUGE
    text = server.metrics()
    assert "# HELP app_queue_depth Requests queued by the app" in text
    assert "# TYPE app_queue_depth gauge" in text
    assert 'app_queue_depth{queue="main"} 4.5' in text
    del metric, family
    gc.collect()
    assert "app_queue_depth" not in server.metrics()  # released with its objects


def test_counter_errors_are_tritons():
    family = tritonserver.MetricFamily(tritonserver.MetricKind.COUNTER, "app_requests", "Requests")
    counter = tritonserver.Metric(family)
    counter.increment(2)
    assert counter.value == 2
    with pytest.raises(tritonserver.UnsupportedError, match="^TRITONSERVER_METRIC_KIND_COUNTER does not support Set$"):
        counter.set_value(1)
    with pytest.raises(tritonserver.InvalidArgumentError, match="can only be incremented monotonically"):
        counter.increment(-1)
    with pytest.raises(tritonserver.InvalidArgumentError,
                       match=r"^Parameter \[n\] must have a type of TRITONSERVER_PARAMETER_STRING to be added as"):
        tritonserver.Metric(family, {"n": 1})
    with pytest.raises(TypeError, match="incompatible function arguments"):
        counter.increment("1")
    with pytest.raises(TypeError, match="incompatible function arguments"):
        tritonserver.MetricFamily(0, "app_x", "")  # an int is not a TRITONSERVER_MetricKind
