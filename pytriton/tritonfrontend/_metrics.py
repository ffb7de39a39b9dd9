"""`Metrics`: the Prometheus metrics port (GET /metrics) for an in-process server (tritonfrontend `_metrics.py`)."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from pytriton.frontend.http1 import HttpListener
from pytriton.frontend.metrics.server import MetricsApp
from pytriton.tritonfrontend._frontend import Frontend, Rule, check

if typing.TYPE_CHECKING:
    from pytriton.server.composition import Server as ComposedServer

_RULES = {"address": Rule(str), "port": Rule(int, ge=0, le=65535), "thread_count": Rule(int, gt=0)}


class Metrics(Frontend):
    """Triton's metrics endpoint for an in-process `tritonserver.Server`: what `Server.metrics()` returns."""

    @dataclasses.dataclass
    class Options:
        address: str = "0.0.0.0"
        port: int = 8002
        thread_count: int = 1

        def __post_init__(self) -> None:
            check(self, _RULES)

    _protocol = "HTTP"  # Triton's metrics server is its HTTP server's kind
    _inert = {"thread_count": "requests are served by the server's event loop, not a thread pool"}

    def _make(self, process: ComposedServer, options: Any) -> HttpListener:
        limits = dataclasses.replace(process.config.http_limits, max_input_bytes=MetricsApp.max_input_bytes)
        options_ = self._server.options
        app = MetricsApp(process.core, gpu_metrics=options_.gpu_metrics,  # type: ignore[arg-type]  # core: started
                         cpu_metrics=options_.cpu_metrics,
                         interval_s=options_.metrics_interval / 1000.0)
        return HttpListener(app.handle, options.address, options.port, "Metrics Service", limits, protocol="metrics")


__all__ = ["Metrics"]
