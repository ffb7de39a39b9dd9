"""Settings of the SageMaker and Vertex AI endpoints that do not depend on a running server: the safe port range,
Triton's port-collision check, the Vertex AI routes and port from the environment, and the SageMaker environment."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SAGEMAKER_DEFAULT_PORT = 8080
VERTEX_AI_DEFAULT_PORT = 8080
SAGEMAKER_INFERENCE_TYPES = ("infer", "generate", "generate_stream")
_INT = re.compile(r"\s*[+-]?\d+\s*$")


def parse_safe_port_range(text: str) -> tuple[int, int]:
    """`--sagemaker-safe-port-range <integer>-<integer>` as Triton parses it (ValueError with its wording)."""
    first, delimiter, second = text.partition("-")
    if not delimiter:
        raise ValueError(
            "Cannot parse pair option due to incorrect number of inputs.--<pair option> argument requires format "
            f"<first>-<second>. Found: {text}"
        )
    values = []
    for part in (first, second):
        if not _INT.match(part):
            raise ValueError(f"invalid value for --sagemaker-safe-port-range '{text}': '{part}' is not an integer")
        values.append(int(part))
    return values[0], values[1]


def check_port_collision(services: list[tuple[str, str, int, tuple[int, int] | None]]) -> None:
    """Triton's check of the enabled services' (name, address, port, allowed range for the others): a service
    outside the SageMaker safe port range, or two services on one address and port, is a ValueError. Port 0 (any
    free port) is left out: its port is not known before it listens."""
    for i, (name, address, port, allowed) in enumerate(services):
        others = services if allowed is not None else services[i + 1:]
        for other in others:
            other_name, other_address, other_port, _ = other
            if other is services[i] or other_address != address or other_port == 0 or port == 0:
                continue
            if allowed is not None and not allowed[0] <= other_port <= allowed[1]:
                raise ValueError(
                    f"The server cannot listen to {other_name} requests at port {other_port}, allowed port range is "
                    f"[{allowed[0]}, {allowed[1]}]"
                )
            if port == other_port:
                raise ValueError(
                    f"The server cannot listen to {name} requests and {other_name} requests at the same address and "
                    f"port {address}:{port}"
                )


def vertex_ai_port(environ: Mapping[str, str]) -> int:
    """Triton's default Vertex AI port: AIP_HTTP_PORT if set, else 8080."""
    text = environ.get("AIP_HTTP_PORT", str(VERTEX_AI_DEFAULT_PORT))
    if not _INT.match(text):
        raise ValueError(f"AIP_HTTP_PORT={text!r}: expected a port number")
    return int(text)


def vertex_ai_mode(environ: Mapping[str, str]) -> bool:
    """AIP_MODE=PREDICTION: Triton then allows Vertex AI and disallows HTTP and gRPC unless told otherwise."""
    return environ.get("AIP_MODE", "") == "PREDICTION"


def vertex_ai_routes(environ: Mapping[str, str]) -> tuple[str, str]:
    """(predict route, health route) from AIP_PREDICT_ROUTE and AIP_HEALTH_ROUTE; ValueError (Triton's words) when
    one is missing."""
    predict = environ.get("AIP_PREDICT_ROUTE", "")
    health = environ.get("AIP_HEALTH_ROUTE", "")
    if not predict:
        # (sic: Triton names the variable API_PREDICT_ROUTE in this message)
        raise ValueError("API_PREDICT_ROUTE is not defined for Vertex AI endpoint")
    if not health:
        raise ValueError("AIP_HEALTH_ROUTE is not defined for Vertex AI endpoint")
    return predict, health


def sagemaker_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """The SageMaker endpoint's settings from Triton's variables: the default model (None: the only model served),
    the ping mode ("ready", or "live") and the inference type of /invocations."""
    inference_type = environ.get("SAGEMAKER_TRITON_INFERENCE_TYPE", "infer")
    if inference_type not in SAGEMAKER_INFERENCE_TYPES:
        raise ValueError(
            f"Invalid SAGEMAKER_TRITON_INFERENCE_TYPE '{inference_type}'. Must be one of: infer, generate, "
            "generate_stream"
        )
    return {
        "default_model": environ.get("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME") or None,
        "ping_mode": environ.get("SAGEMAKER_TRITON_PING_MODE", "ready"),
        "inference_type": inference_type,
    }
