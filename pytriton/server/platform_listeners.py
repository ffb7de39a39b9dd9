"""The SageMaker and Vertex AI listeners of a server (`allow_sagemaker`, `allow_vertex_ai`): each on a port of its
own, answering through the KServe HTTP app's handlers (pytriton/frontend/http/sagemaker.py, vertex.py)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from pytriton.config.platforms import check_port_collision, parse_safe_port_range, vertex_ai_routes
from pytriton.config.server import ServerConfig
from pytriton.frontend.http.app import HttpApp
from pytriton.frontend.http.sagemaker import SageMakerApp
from pytriton.frontend.http.vertex import VertexAiApp, default_model
from pytriton.frontend.http1 import HttpListener
from pytriton.frontend.metrics.server import MetricsApp


def check_ports(config: ServerConfig) -> None:
    """Triton's port checks of the enabled endpoints (RuntimeError: the server does not start)."""
    safe: tuple[int, int] | None = None
    try:
        if config.sagemaker_safe_port_range is not None:
            safe = parse_safe_port_range(config.sagemaker_safe_port_range)
        services: list[tuple[str, str, int, Any]] = []
        if config.allow_http:
            services.append(("HTTP", config.http_address, config.http_port, None))
        if config.allow_grpc:
            services.append(("GRPC", config.grpc_address, config.grpc_port, None))
        if config.allow_metrics:
            services.append(("metrics", config.metrics_address, config.metrics_port, None))
        if config.allow_sagemaker:
            services.append(("SageMaker", config.sagemaker_address, config.sagemaker_port, safe))
        if config.allow_vertex_ai:
            services.append(("Vertex AI", config.vertex_ai_address, config.vertex_ai_port, None))
        if config.openai_port is not None:
            services.append(("OpenAI", config.openai_address, config.openai_port, None))
        check_port_collision(services)
    except ValueError as exc:
        raise RuntimeError(str(exc)) from None


async def start_platform_listeners(config: ServerConfig, make_app: Any, core: Any,
                                   environ: Mapping[str, str] | None = None) -> list[HttpListener]:
    """Start the enabled platform listeners; `make_app()` builds a KServe HTTP app for them. On a failure the ones
    started are stopped and RuntimeError raised with Triton's words."""
    environ = os.environ if environ is None else environ
    started: list[HttpListener] = []
    try:
        if config.allow_sagemaker:
            app: HttpApp = make_app()
            try:
                sagemaker = SageMakerApp(app, environ)
            except ValueError as exc:
                raise RuntimeError(f"failed to start SageMaker service: {exc}") from None
            listener = HttpListener(sagemaker.handle, config.sagemaker_address, config.sagemaker_port,
                                    "Sagemaker HTTPService", config.http_limits, too_large_hint=app.too_large_hint,
                                    protocol="SageMaker")
            await listener.start()
            started.append(listener)
        if config.allow_vertex_ai:
            app = make_app()
            try:
                predict, health = vertex_ai_routes(environ)
                index = core.repository_index(True)
                # Models bound by `Triton` are added after the server starts: then chosen at the first prediction
                model = default_model(index, config.vertex_ai_default_model) if index else None
            except ValueError as exc:
                raise RuntimeError(f"failed to start Vertex AI service: Invalid argument - {exc}") from None
            limits = dataclasses.replace(config.http_limits)
            metrics = MetricsApp(core, gpu_metrics=config.allow_gpu_metrics)
            vertex = VertexAiApp(app, predict, health, model, metrics.handle, config.vertex_ai_default_model)
            listener = HttpListener(vertex.handle, config.vertex_ai_address, config.vertex_ai_port,
                                    "Vertex AI HTTPService", limits, too_large_hint=app.too_large_hint,
                                    protocol="Vertex AI")
            await listener.start()
            started.append(listener)
    except BaseException:
        for listener in started:
            await listener.stop()
        raise
    return started
