"""allow_cpu_metrics and metrics_interval_ms on the metrics port's registry: the CPU gauges are there or not, and the
CPU/GPU gauges are read at most once per interval (a fake clock; the GPU through the fake pynvml)."""

from __future__ import annotations

import json

import pytest
from prometheus_client import Metric

from pytriton.config import gpus
from pytriton.core.server_core import ServerCore
from pytriton.frontend.metrics.collector import render_metrics
from pytriton.frontend.metrics.host import Throttled
from pytriton.frontend.metrics.server import MetricsApp
from tests._fake_nvml import fake_gpus, install_fake_pynvml

CPU_FAMILIES = ("nv_cpu_utilization", "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes")


@pytest.fixture
def fake_nvml(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", json.dumps(fake_gpus(1)))
    yield install_fake_pynvml(monkeypatch)
    gpus.physical_gpus.cache_clear()


def families(app: MetricsApp) -> dict[str, list]:
    found: dict[str, list] = {}
    for metric in app.registry.collect():
        found.setdefault(metric.name, []).extend(s.value for s in metric.samples)
    return found


@pytest.mark.parametrize("allowed", [True, False])
def test_allow_cpu_metrics(allowed):
    app = MetricsApp(ServerCore(), gpu_metrics=False, cpu_metrics=allowed)
    text = render_metrics(app.registry).decode()
    for name in CPU_FAMILIES:
        assert (f"\n{name} " in text) is allowed, name
        assert (f"# TYPE {name} gauge" in text) is allowed
    assert "nv_inference_pending_request_count" in text  # the models' families do not depend on it
    if allowed:
        total = families(app)["nv_cpu_memory_total_bytes"][0]
        assert total > 0 and 0 <= families(app)["nv_cpu_utilization"][0] <= 1


class Counting:
    """A gauge source whose value is the number of times it was read."""

    def __init__(self) -> None:
        self.reads = 0

    def collect(self):
        self.reads += 1
        metric = Metric("reads", "times read", "gauge")
        metric.add_sample("reads", {}, self.reads)
        yield metric


def test_throttled_reads_at_most_once_per_interval():
    now = [100.0]
    source = Counting()
    throttled = Throttled(source, interval_s=2.0, clock=lambda: now[0])
    value = lambda: [s.value for m in throttled.collect() for s in m.samples]  # noqa: E731
    assert value() == [1]  # the first scrape reads
    now[0] += 1.999
    assert value() == [1] and source.reads == 1  # within the interval: the last reading
    now[0] += 0.001
    assert value() == [2]  # the interval has passed: read again
    assert value() == [2] and source.reads == 2


def test_gpu_gauges_follow_the_interval(fake_nvml):
    """The fake GPU's energy grows by 1 J at each NVML reading: with a long interval two scrapes see one reading."""
    slow = MetricsApp(ServerCore(), gpu_metrics=True, cpu_metrics=False, interval_s=3600.0)
    assert families(slow)["nv_energy_consumption"] == families(slow)["nv_energy_consumption"] == [1.0]
    every = MetricsApp(ServerCore(), gpu_metrics=True, cpu_metrics=False, interval_s=0.0)
    assert families(every)["nv_energy_consumption"] == [1.0]
    assert families(every)["nv_energy_consumption"] == [2.0]
