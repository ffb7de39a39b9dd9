"""Serves `/metrics` (Prometheus text format) on the metrics port."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from pytriton.core.server_core import ServerCore
from pytriton.frontend.http1 import HttpRequest, HttpResponse, error_response
from pytriton.frontend.metrics.collector import CONTENT_TYPE, TritonMetricsCollector, render_metrics
from pytriton.frontend.metrics.gpu import GpuMetricsSource


class MetricsApp:
    """GET /metrics; anything else is 404/405."""

    max_input_bytes = 64 * 1024  # the port's body limit (`HttpLimits.max_input_bytes` of its listener)

    def __init__(self, core: ServerCore, gpu_metrics: bool = True):
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(TritonMetricsCollector(core))
        if gpu_metrics:
            self.registry.register(GpuMetricsSource())

    async def handle(self, request: HttpRequest) -> HttpResponse:
        if request.path.rstrip("/") != "/metrics":
            return error_response(404, "Not Found")
        if request.method != "GET":
            return error_response(405, "Method Not Allowed")
        return HttpResponse(200, [render_metrics(self.registry)], [("Content-Type", CONTENT_TYPE)])
