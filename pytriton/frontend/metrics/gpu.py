"""Triton's per-GPU metrics (nv_gpu_*, nv_energy_consumption, label gpu_uuid) read through NVML when scraped.

NVML is opened once, with a handle per visible GPU; a scrape then costs a few NVML calls per GPU. Without NVML
(no GPU, no driver, or no nvidia-ml-py) nothing is exported, as Triton exports no GPU metrics without GPUs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client import Metric

from pytriton.config.gpus import visible_gpus

logger = logging.getLogger("pytriton.frontend")

# (metric name, help, type): Triton's names, descriptions and units (utilization 0..1, watts, joules, bytes).
GPU_METRICS = (
    ("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", "gauge"),
    ("nv_gpu_memory_total_bytes", "GPU total memory, in bytes", "gauge"),
    ("nv_gpu_memory_used_bytes", "GPU used memory, in bytes", "gauge"),
    ("nv_gpu_power_usage", "GPU power usage in watts", "gauge"),
    ("nv_gpu_power_limit", "GPU power management limit in watts", "gauge"),
    ("nv_energy_consumption", "GPU energy consumption in joules since the Triton Server started", "counter"),
)


class GpuMetricsSource:
    """The visible GPUs' NVML handles, opened at construction; `collect()` reads them at each scrape."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._gpus: list[tuple[str, Any, int | None]] = []  # (uuid, handle, energy in mJ at start)
        devices = visible_gpus()
        if not devices:
            return
        try:
            import pynvml  # noqa: PLC0415 - only where GPUs were found

            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError, ImportError, OSError: no GPU metrics then
            logger.info("GPU metrics are not exported: NVML is not available (%s)", exc)
            return
        self._nvml = pynvml
        for device in devices:
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(device.index)
            except Exception as exc:  # noqa: BLE001
                logger.warning("no GPU metrics for GPU %s: %s", device.uuid or device.index, exc)
                continue
            self._gpus.append((device.uuid, handle, self._read(pynvml.nvmlDeviceGetTotalEnergyConsumption, handle)))

    def _read(self, query: Any, handle: Any) -> Any:
        """One NVML query; None where the GPU does not support it (or it fails)."""
        try:
            return query(handle)
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends: the sample is left out
            return None

    def collect(self) -> Iterator[Metric]:
        """The GPU metric families, one sample per GPU for each value NVML reports; nothing without GPUs."""
        if not self._gpus:
            return
        nvml = self._nvml
        families = {name: Metric(name, doc, kind) for name, doc, kind in GPU_METRICS}

        def add(name: str, uuid: str, value: float | None) -> None:
            if value is not None:
                families[name].add_sample(name, {"gpu_uuid": uuid}, value)

        for uuid, handle, energy_start in self._gpus:
            utilization = self._read(nvml.nvmlDeviceGetUtilizationRates, handle)
            add("nv_gpu_utilization", uuid, utilization.gpu / 100.0 if utilization is not None else None)
            memory = self._read(nvml.nvmlDeviceGetMemoryInfo, handle)
            add("nv_gpu_memory_total_bytes", uuid, memory.total if memory is not None else None)
            add("nv_gpu_memory_used_bytes", uuid, memory.used if memory is not None else None)
            power = self._read(nvml.nvmlDeviceGetPowerUsage, handle)  # milliwatts
            add("nv_gpu_power_usage", uuid, power / 1000.0 if power is not None else None)
            limit = self._read(nvml.nvmlDeviceGetPowerManagementLimit, handle)
            add("nv_gpu_power_limit", uuid, limit / 1000.0 if limit is not None else None)
            energy = self._read(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)  # millijoules since driver load
            if energy is not None and energy_start is not None:
                add("nv_energy_consumption", uuid, max(0, energy - energy_start) / 1000.0)
        yield from families.values()


__all__ = ["GPU_METRICS", "GpuMetricsSource"]
