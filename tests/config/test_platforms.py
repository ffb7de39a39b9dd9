"""The SageMaker and Vertex AI settings: Triton's safe-port-range parsing and port checks, the AIP_* defaults, and
TritonConfig's fields becoming the server's configuration (the endpoints themselves: tests/e2e/test_sagemaker*.py,
tests/e2e/test_vertex_ai.py)."""

from __future__ import annotations

import pytest

from pytriton.cli.platform_options import platform_fields
from pytriton.config.platforms import check_port_collision, parse_safe_port_range, sagemaker_settings, vertex_ai_routes
from pytriton.config.triton_config import TritonSecurityConfig, server_config
from pytriton.exceptions import PyTritonValidationError
from pytriton.triton import TritonConfig


def test_safe_port_range_is_parsed_as_triton_does() -> None:
    assert parse_safe_port_range("8000-8002") == (8000, 8002)
    with pytest.raises(ValueError, match=r"incorrect number of inputs\..*<first>-<second>\. Found: 8000"):
        parse_safe_port_range("8000")
    with pytest.raises(ValueError, match="'x' is not an integer"):
        parse_safe_port_range("x-8000")


def test_port_checks() -> None:
    safe = (8000, 8002)
    check_port_collision([("HTTP", "0.0.0.0", 8000, None), ("GRPC", "0.0.0.0", 8001, None),
                          ("metrics", "0.0.0.0", 8002, None), ("SageMaker", "0.0.0.0", 8080, safe)])
    with pytest.raises(ValueError, match=r"^The server cannot listen to metrics requests at port 8003, allowed port "
                                         r"range is \[8000, 8002\]$"):
        check_port_collision([("HTTP", "0.0.0.0", 8000, None), ("metrics", "0.0.0.0", 8003, None),
                              ("SageMaker", "0.0.0.0", 8080, safe)])
    # another address is not held to the range; port 0 (any free port) is not checked
    check_port_collision([("HTTP", "127.0.0.1", 9000, None), ("GRPC", "0.0.0.0", 0, None),
                          ("SageMaker", "0.0.0.0", 8080, safe)])
    with pytest.raises(ValueError, match=r"^The server cannot listen to HTTP requests and Vertex AI requests at the "
                                         r"same address and port 0.0.0.0:8080$"):
        check_port_collision([("HTTP", "0.0.0.0", 8080, None), ("Vertex AI", "0.0.0.0", 8080, None)])


def test_environment_settings() -> None:
    assert vertex_ai_routes({"AIP_PREDICT_ROUTE": "/p", "AIP_HEALTH_ROUTE": "/h"}) == ("/p", "/h")
    with pytest.raises(ValueError, match="^API_PREDICT_ROUTE is not defined for Vertex AI endpoint$"):
        vertex_ai_routes({"AIP_HEALTH_ROUTE": "/h"})
    assert sagemaker_settings({}) == {"default_model": None, "ping_mode": "ready", "inference_type": "infer"}
    with pytest.raises(ValueError, match="Invalid SAGEMAKER_TRITON_INFERENCE_TYPE 'x'. Must be one of: infer, "
                                         "generate, generate_stream"):
        sagemaker_settings({"SAGEMAKER_TRITON_INFERENCE_TYPE": "x"})


def test_cli_defaults_from_aip_variables() -> None:
    given = {"allow_sagemaker": False, "sagemaker_address": "0.0.0.0", "vertex_ai_address": "0.0.0.0",
             "sagemaker_port": 8080, "sagemaker_safe_port_range": None, "sagemaker_thread_count": None,
             "allow_vertex_ai": None, "vertex_ai_port": None, "vertex_ai_thread_count": None,
             "vertex_ai_default_model": None}
    fields = platform_fields(given, {"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": "7080"})
    assert (fields["allow_vertex_ai"], fields["vertex_ai_port"]) == (True, 7080)
    fields = platform_fields(dict(given, vertex_ai_port=9000, allow_vertex_ai=False), {"AIP_HTTP_PORT": "7080"})
    assert (fields["allow_vertex_ai"], fields["vertex_ai_port"]) == (False, 9000)
    assert platform_fields(given, {})["vertex_ai_port"] == 8080


def test_triton_config_fields_reach_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIP_MODE", raising=False)
    monkeypatch.setenv("AIP_HTTP_PORT", "7081")
    triton_config = TritonConfig(allow_sagemaker=True, sagemaker_port=9080, sagemaker_safe_port_range="9000-9100",
                                 allow_vertex_ai=True, vertex_ai_default_model="m")
    config = server_config(triton_config, TritonSecurityConfig())
    assert (config.allow_sagemaker, config.sagemaker_port, config.sagemaker_safe_port_range) == (True, 9080,
                                                                                                 "9000-9100")
    assert (config.allow_vertex_ai, config.vertex_ai_port, config.vertex_ai_default_model) == (True, 7081, "m")
    config = server_config(TritonConfig(), TritonSecurityConfig())
    assert (config.allow_sagemaker, config.sagemaker_port, config.allow_vertex_ai) == (False, 8080, False)
    with pytest.raises(PyTritonValidationError, match="TritonConfig.sagemaker_safe_port_range: .*Found: 9000"):
        TritonConfig(allow_sagemaker=True, sagemaker_safe_port_range="9000")
