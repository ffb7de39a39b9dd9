"""`Server.metrics()`: the metrics port's Prometheus text, rendered in-process from the core."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from pytriton.frontend.metrics.collector import TritonMetricsCollector, render_metrics
from pytriton.frontend.metrics.gpu import GpuMetricsSource

_CPU_FAMILIES = ("nv_cpu_",)


def render(core: Any, gpu_metrics: bool, cpu_metrics: bool) -> str:
    """Triton's nv_* families of the core's models (nv_cpu_* unless `cpu_metrics` is off, nv_gpu_* if asked)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TritonMetricsCollector(core))
    if gpu_metrics:
        registry.register(GpuMetricsSource())
    text = render_metrics(registry).decode()
    if cpu_metrics:
        return text
    kept = [line for line in text.splitlines()
            if not any(line.startswith(p) or line.startswith(f"# HELP {p}") or line.startswith(f"# TYPE {p}")
                       for p in _CPU_FAMILIES)]
    return "\n".join(kept) + "\n"


__all__ = ["render"]
