"""`pytriton serve`'s SageMaker and Vertex AI options, with Triton's names and defaults (AIP_MODE, AIP_HTTP_PORT)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import click

from pytriton.config.platforms import (
    SAGEMAKER_DEFAULT_PORT,
    parse_safe_port_range,
    vertex_ai_mode,
    vertex_ai_port,
)

_NAMES = ("allow_sagemaker", "sagemaker_address", "vertex_ai_address", "sagemaker_port", "sagemaker_safe_port_range", "sagemaker_thread_count",
          "allow_vertex_ai", "vertex_ai_port", "vertex_ai_thread_count", "vertex_ai_default_model")


def platform_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the SageMaker and Vertex AI flags to `command`, which receives them as `platforms` (ServerConfig fields;
    the thread counts are accepted and have no effect: requests are served by the event loop)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name) for name in _NAMES}
        kwargs["platforms"] = platform_fields(given, os.environ)
        return command(*args, **kwargs)

    options = [
        click.option("--allow-sagemaker", type=click.BOOL, default=False, metavar="BOOLEAN", show_default=True,
                     help="Serve Triton's SageMaker endpoint (GET /ping, POST /invocations) on --sagemaker-port."),
        click.option("--sagemaker-port", type=click.IntRange(0, 65535), default=SAGEMAKER_DEFAULT_PORT,
                     show_default=True, help="The SageMaker endpoint's port (0 = any free port)."),
        click.option("--sagemaker-address", default="0.0.0.0", show_default=True,
                     help="The SageMaker endpoint's address (pytriton's addition; Triton always uses 0.0.0.0)."),
        click.option("--sagemaker-safe-port-range", metavar="LOW-HIGH", default=None,
                     help="The ports the other endpoints must use (on the same address); the server refuses to "
                          "start otherwise."),
        click.option("--sagemaker-thread-count", type=click.IntRange(min=1), default=None,
                     help="Accepted for Triton compatibility; no effect (requests are served by the event loop)."),
        click.option("--allow-vertex-ai", type=click.BOOL, default=None, metavar="BOOLEAN",
                     help="Serve Triton's Vertex AI endpoint (AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE) on "
                          "--vertex-ai-port. Default: true if AIP_MODE=PREDICTION (which also turns HTTP and gRPC "
                          "off unless they are allowed explicitly), else false."),
        click.option("--vertex-ai-port", type=click.IntRange(0, 65535), default=None,
                     help="The Vertex AI endpoint's port. Default: AIP_HTTP_PORT if set, else 8080."),
        click.option("--vertex-ai-address", default="0.0.0.0", show_default=True,
                     help="The Vertex AI endpoint's address (pytriton's addition; Triton always uses 0.0.0.0)."),
        click.option("--vertex-ai-thread-count", type=click.IntRange(min=1), default=None,
                     help="Accepted for Triton compatibility; no effect (requests are served by the event loop)."),
        click.option("--vertex-ai-default-model", default=None, metavar="NAME",
                     help="The model the predict route runs (default: the only model served)."),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def platform_fields(given: dict[str, Any], environ: Any) -> dict[str, Any]:
    """ServerConfig fields from the flags as given (None: not given) and the environment."""
    if given["sagemaker_safe_port_range"] is not None:
        try:
            parse_safe_port_range(given["sagemaker_safe_port_range"])
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--sagemaker-safe-port-range") from None
    fields: dict[str, Any] = {
        "allow_sagemaker": bool(given["allow_sagemaker"]),
        "sagemaker_address": given["sagemaker_address"],
        "vertex_ai_address": given["vertex_ai_address"],
        "sagemaker_port": given["sagemaker_port"],
        "sagemaker_safe_port_range": given["sagemaker_safe_port_range"],
        "allow_vertex_ai": vertex_ai_mode(environ) if given["allow_vertex_ai"] is None else given["allow_vertex_ai"],
        "vertex_ai_default_model": given["vertex_ai_default_model"] or "",
    }
    if given["vertex_ai_port"] is not None:
        fields["vertex_ai_port"] = given["vertex_ai_port"]
    else:
        try:
            fields["vertex_ai_port"] = vertex_ai_port(environ)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--vertex-ai-port") from None
    return fields
