"""`Server.metrics()`: the metrics port's Prometheus text, rendered in-process from the core."""

from __future__ import annotations

from typing import Any

from pytriton.frontend.metrics.collector import render_metrics
from pytriton.frontend.metrics.server import metrics_registry


def render(core: Any, gpu_metrics: bool, cpu_metrics: bool) -> str:
    """Triton's nv_* families of the core's models (nv_cpu_* unless `cpu_metrics` is off, nv_gpu_* if asked), read
    now."""
    return render_metrics(metrics_registry(core, gpu_metrics, cpu_metrics, interval_s=0.0)).decode()


__all__ = ["render"]
