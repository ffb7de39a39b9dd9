"""nv_gpu_* from NVML (the fake pynvml): Triton's names, units and gpu_uuid label; unsupported readings left out."""

from __future__ import annotations

import json

import pytest

from pytriton.config import gpus
from pytriton.core.server_core import ServerCore
from pytriton.frontend.metrics.collector import render_metrics
from pytriton.frontend.metrics.gpu import GpuMetricsSource
from pytriton.frontend.metrics.server import MetricsApp
from tests._fake_nvml import fake_gpus, install_fake_pynvml


@pytest.fixture
def fake_nvml(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield install_fake_pynvml(monkeypatch)
    gpus.physical_gpus.cache_clear()


def values(source: GpuMetricsSource) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels["gpu_uuid"]): s.value for family in source.collect() for s in family.samples}


def test_readings_in_triton_units(fake_nvml, monkeypatch):
    devices = fake_gpus(2)
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", json.dumps(devices))
    source = GpuMetricsSource()
    first, second = values(source), values(source)
    for gpu in devices:
        uuid = gpu["uuid"]
        assert first[("nv_gpu_utilization", uuid)] == gpu["utilization"] / 100
        assert first[("nv_gpu_memory_total_bytes", uuid)] == gpu["memory_total"]
        assert first[("nv_gpu_memory_used_bytes", uuid)] == gpu["memory_used"]
        assert first[("nv_gpu_power_usage", uuid)] == gpu["power_mw"] / 1000
        assert first[("nv_gpu_power_limit", uuid)] == gpu["power_limit_mw"] / 1000
        assert first[("nv_energy_consumption", uuid)] == 1.0  # joules since the source opened NVML
        assert second[("nv_energy_consumption", uuid)] == 2.0
    assert fake_nvml._initialized == 1  # opened once, kept open: a scrape opens nothing


def test_a_reading_the_gpu_does_not_support_is_left_out(fake_nvml, monkeypatch):
    device = {k: v for k, v in fake_gpus(1)[0].items() if k not in ("power_mw", "energy_mj")}
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", json.dumps([device]))
    names = {name for name, _ in values(GpuMetricsSource())}
    assert names == {"nv_gpu_utilization", "nv_gpu_memory_total_bytes", "nv_gpu_memory_used_bytes",
                     "nv_gpu_power_limit"}


def test_no_gpu_no_gpu_metrics(fake_nvml, monkeypatch):
    monkeypatch.delenv("PYTRITON_FAKE_NVML_DEVICES", raising=False)  # no NVML library
    monkeypatch.setattr(gpus, "DRIVER_GPUS_DIR", gpus.DRIVER_GPUS_DIR / "absent")
    assert list(GpuMetricsSource().collect()) == []


@pytest.mark.parametrize("allowed", [True, False])
def test_allow_gpu_metrics(fake_nvml, monkeypatch, allowed):
    monkeypatch.setenv("PYTRITON_FAKE_NVML_DEVICES", json.dumps(fake_gpus(1)))
    text = render_metrics(MetricsApp(ServerCore(), gpu_metrics=allowed).registry).decode()
    assert ("# TYPE nv_energy_consumption counter\n" in text) is allowed
    assert (f'nv_gpu_memory_total_bytes{{gpu_uuid="{fake_gpus(1)[0]["uuid"]}"}} 17179869184\n' in text) is allowed


@pytest.mark.parametrize("given, expected", [(None, True), (False, False)])
def test_triton_config_allow_gpu_metrics_reaches_the_server(caplog, given, expected):
    """`TritonConfig(allow_gpu_metrics=...)` (PyTriton's field) is honoured, not logged as ignored, and survives the
    JSON hand-over to the server process."""
    from pytriton.config.server import ServerConfig
    from pytriton.config.triton_config import TritonConfig, TritonSecurityConfig, server_config

    with caplog.at_level("INFO"):
        config = server_config(TritonConfig(allow_gpu_metrics=given), TritonSecurityConfig())
    assert ServerConfig.from_json(config.to_json()).allow_gpu_metrics is expected
    assert "allow_gpu_metrics" not in caplog.text
