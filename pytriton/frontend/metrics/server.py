"""Serves `/metrics` (Prometheus text format) on the metrics port."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from pytriton.core.server_core import ServerCore
from pytriton.frontend.http1 import HttpRequest, HttpResponse, error_response
from pytriton.frontend.metrics.collector import CONTENT_TYPE, TritonMetricsCollector, render_metrics
from pytriton.frontend.metrics.gpu import GpuMetricsSource
from pytriton.frontend.metrics.host import CpuMetricsSource, Throttled

DEFAULT_INTERVAL_S = 2.0  # Triton's --metrics-interval-ms default


def metrics_registry(core: ServerCore, gpu_metrics: bool = True, cpu_metrics: bool = True,
                     interval_s: float = DEFAULT_INTERVAL_S) -> CollectorRegistry:
    """The collectors of the metrics port: the core's nv_* families (read at each scrape), and the CPU and GPU
    gauges that are allowed (read at most once per `interval_s`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TritonMetricsCollector(core))
    if cpu_metrics:
        registry.register(Throttled(CpuMetricsSource(), interval_s))
    if gpu_metrics:
        registry.register(Throttled(GpuMetricsSource(), interval_s))
    return registry


class MetricsApp:
    """GET /metrics; anything else is 404/405."""

    max_input_bytes = 64 * 1024  # the port's body limit (`HttpLimits.max_input_bytes` of its listener)

    def __init__(self, core: ServerCore, gpu_metrics: bool = True, cpu_metrics: bool = True,
                 interval_s: float = DEFAULT_INTERVAL_S):
        self.registry = metrics_registry(core, gpu_metrics, cpu_metrics, interval_s)

    async def handle(self, request: HttpRequest) -> HttpResponse:
        if request.path.rstrip("/") != "/metrics":
            return error_response(404, "Not Found")
        if request.method != "GET":
            return error_response(405, "Method Not Allowed")
        return HttpResponse(200, [render_metrics(self.registry)], [("Content-Type", CONTENT_TYPE)])
