"""`Server.metrics()`: the metrics port's Prometheus text, rendered in-process from the core, with the application's
custom metrics (`tritonserver.MetricFamily`)."""

from __future__ import annotations

from typing import Any

from pytriton.frontend.metrics.collector import render_metrics
from pytriton.frontend.metrics.server import metrics_registry
from pytriton.tritonserver._custom_metrics import ApplicationMetrics


def render(core: Any, gpu_metrics: bool, cpu_metrics: bool) -> str:
    """Triton's nv_* families of the core's models (nv_cpu_* unless `cpu_metrics` is off, nv_gpu_* if asked), the
    models' and the application's custom families, read now."""
    registry = metrics_registry(core, gpu_metrics, cpu_metrics, interval_s=0.0)
    registry.register(ApplicationMetrics({family.name for family in core.custom_metrics}))
    return render_metrics(registry).decode()


__all__ = ["render"]
