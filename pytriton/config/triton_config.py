"""PyTriton's server configuration (`TritonConfig`, as in PyTriton; fields this server has no use for are accepted and
logged once), the security configuration and the lifecycle policy; and how they become a `ServerConfig`.

Public names are imported from `pytriton.triton`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import secrets
from typing import Any

from pytriton.config import env as _env
from pytriton.config.cache import parse_cache_config
from pytriton.config.h2 import INFER_COMPRESSION_LEVELS, H2Limits, keepalive_fields
from pytriton.config.metrics import MetricsSettings
from pytriton.config.platforms import SAGEMAKER_DEFAULT_PORT, parse_safe_port_range, vertex_ai_mode, vertex_ai_port
from pytriton.config.server import DEFAULT_METRICS_INTERVAL_MS, DEFAULT_SERVER_ID, ServerConfig
from pytriton.config.tls import TlsSettings
from pytriton.config.trace import parse_trace_config
from pytriton.config.triton_config_fields import IGNORED_FIELDS
from pytriton.exceptions import PyTritonValidationError

logger = logging.getLogger("pytriton.triton")

DEFAULT_HTTP_PORT = 8000
DEFAULT_GRPC_PORT = 8001
DEFAULT_METRICS_PORT = 8002
DEFAULT_EXIT_TIMEOUT_S = 30

TRITON_ACCESS_HEADER = "triton-access-token"
VALID_TRITON_ENDPOINTS = frozenset(
    {"health", "metadata", "inference", "shared-memory", "model-config", "model-repository", "statistics", "trace",
     "logging"}
)
DEFAULT_PROTECTED_ENDPOINTS = ["shared-memory", "model-repository", "statistics", "trace", "logging"]
MODEL_URL = "/v2/models/{model_name}"
MODEL_READY_URL = "/v2/models/{model_name}/ready/"
MODEL_CONFIG_URL = "/v2/models/{model_name}/config/"
MODEL_INFER_URL = "/v2/models/{model_name}/infer/"

# TritonConfig fields this server has no use for: accepted (so configurations keep working) and logged once; the
# reasons live in pytriton/config/triton_config_fields.py with what every other field does.
_IGNORED_FIELDS = IGNORED_FIELDS
_logged_ignored: set[str] = set()


@dataclasses.dataclass(kw_only=True)
class TritonConfig:
    """Server configuration; every field is optional and None means the default (as in PyTriton)."""

    model_repository: pathlib.Path | None = None
    allow_model_upload: bool | None = None
    id: str | None = None
    log_verbose: int | None = None
    log_file: pathlib.Path | None = None
    exit_timeout_secs: int | None = None
    # pytriton's own (Triton has none): an execution that runs longer fails its requests and its worker is
    # restarted; `pytriton serve --execution-timeout` is the same setting.
    execution_timeout_secs: float | None = None
    exit_on_error: bool | None = None
    strict_readiness: bool | None = None
    allow_http: bool | None = None
    http_address: str | None = None
    http_port: int | None = None
    http_header_forward_pattern: str | None = None
    http_thread_count: int | None = None
    http_restricted_api: str | None = None
    allow_grpc: bool | None = None
    grpc_address: str | None = None
    grpc_port: int | None = None
    grpc_header_forward_pattern: str | None = None
    grpc_infer_allocation_pool_size: int | None = None
    grpc_use_ssl: bool | None = None
    grpc_use_ssl_mutual: bool | None = None
    grpc_server_cert: pathlib.Path | None = None
    grpc_server_key: pathlib.Path | None = None
    grpc_root_cert: pathlib.Path | None = None
    grpc_infer_response_compression_level: str | None = None
    grpc_keepalive_time: int | None = None
    grpc_keepalive_timeout: int | None = None
    grpc_keepalive_permit_without_calls: bool | None = None
    grpc_http2_max_pings_without_data: int | None = None
    grpc_http2_min_recv_ping_interval_without_data: int | None = None
    grpc_http2_max_ping_strikes: int | None = None
    grpc_restricted_protocol: str | None = None
    # pytriton's own (Triton has no HTTP TLS): HTTPS on the HTTP port, as the grpc_* fields above for gRPC;
    # `pytriton serve --http-use-ssl ...` is the same setting.
    http_use_ssl: bool | None = None
    http_use_ssl_mutual: bool | None = None
    http_server_cert: pathlib.Path | None = None
    http_server_key: pathlib.Path | None = None
    http_root_cert: pathlib.Path | None = None
    allow_metrics: bool | None = None
    allow_gpu_metrics: bool | None = None
    allow_cpu_metrics: bool | None = None
    metrics_interval_ms: int | None = None
    metrics_port: int | None = None
    metrics_address: str | None = None
    allow_sagemaker: bool | None = None
    sagemaker_port: int | None = None
    sagemaker_safe_port_range: str | None = None
    sagemaker_thread_count: int | None = None
    allow_vertex_ai: bool | None = None
    vertex_ai_port: int | None = None
    vertex_ai_thread_count: int | None = None
    vertex_ai_default_model: str | None = None
    openai_port: int | None = None
    openai_api_key: str | None = None
    openai_tokenizer: str | None = None
    # pytriton's own: TLS on the OpenAI port, as the http_* fields above for the HTTP port
    openai_use_ssl: bool | None = None
    openai_use_ssl_mutual: bool | None = None
    openai_server_cert: pathlib.Path | None = None
    openai_server_key: pathlib.Path | None = None
    openai_root_cert: pathlib.Path | None = None
    metrics_config: list[str] | None = None
    trace_config: list[str] | None = None
    cache_config: list[str] | None = None
    cache_directory: str | None = None
    buffer_manager_thread_count: int | None = None

    def __post_init__(self) -> None:
        if self.allow_http is not None and self.allow_grpc is not None and not self.allow_http and not self.allow_grpc:
            raise PyTritonValidationError("The `http` or `grpc` endpoint has to be allowed.")
        try:
            grpc_tls_of(self)
            http_tls_of(self)
            openai_tls_of(self)
        except ValueError as exc:
            raise PyTritonValidationError(f"TritonConfig: {exc}") from None
        if self.execution_timeout_secs is not None and not self.execution_timeout_secs > 0:
            raise PyTritonValidationError("TritonConfig.execution_timeout_secs must be a number of seconds > 0")
        try:
            parse_cache_config(self.cache_config or [])
        except ValueError as exc:
            raise PyTritonValidationError(f"TritonConfig.cache_config: {exc}") from None
        try:
            MetricsSettings.parse(self.metrics_config or [])
        except ValueError as exc:
            raise PyTritonValidationError(f"TritonConfig.metrics_config: {exc}") from None
        if self.trace_config is not None:
            if isinstance(self.trace_config, str):
                self.trace_config = [self.trace_config]
            try:
                parse_trace_config(self.trace_config)
            except ValueError as exc:
                raise PyTritonValidationError(f"TritonConfig.trace_config: {exc}") from None
        try:
            grpc_limits_of(self)
        except ValueError as exc:
            raise PyTritonValidationError(f"TritonConfig: {exc}") from None
        if self.sagemaker_safe_port_range is not None:
            try:
                parse_safe_port_range(self.sagemaker_safe_port_range)
            except ValueError as exc:
                raise PyTritonValidationError(f"TritonConfig.sagemaker_safe_port_range: {exc}") from None
        if self.model_repository is not None and not pathlib.Path(self.model_repository).is_dir():
            raise PyTritonValidationError(f"TritonConfig.model_repository: '{self.model_repository}' is not a "
                                          "directory (a Triton model repository: <model>/config.pbtxt, "
                                          "<model>/<version>/model.py)")
        if self.metrics_interval_ms is not None and not self.metrics_interval_ms > 0:
            raise PyTritonValidationError("TritonConfig.metrics_interval_ms must be a number of milliseconds > 0")
        for name, reason in _IGNORED_FIELDS.items():
            if getattr(self, name) is not None and name not in _logged_ignored:
                _logged_ignored.add(name)
                logger.warning("TritonConfig.%s is accepted but has no effect: %s", name, reason)

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set (not None)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> TritonConfig:
        """Build a config from a dict, casting values to the field types; unknown keys are warned about."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        values = {}
        for key, value in config.items():
            if key not in known:
                logger.warning("TritonConfig has no field '%s'; ignoring it", key)
                continue
            values[key] = _cast(known[key], value)
        return cls(**values)

    @classmethod
    def from_env(cls) -> TritonConfig:
        """Read `PYTRITON_TRITON_CONFIG_<FIELD>` environment variables (e.g. PYTRITON_TRITON_CONFIG_GRPC_PORT)."""
        return cls.from_dict(_env.triton_config_settings())


def _cast(field: dataclasses.Field[Any], value: Any) -> Any:
    if value is None:
        return None
    text = str(field.type).lower()
    if "list" in text:
        return value if isinstance(value, list) else [v.strip() for v in str(value).split(",") if v.strip()]
    if "bool" in text:
        if isinstance(value, bool):
            return value
        lowered = str(value).strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise PyTritonValidationError(f"TritonConfig.{field.name}: '{value}' is not a boolean")
    if "int" in text:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise PyTritonValidationError(f"TritonConfig.{field.name}: '{value}' is not an integer") from None
    if "float" in text:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise PyTritonValidationError(f"TritonConfig.{field.name}: '{value}' is not a number") from None
    if "path" in text:
        return pathlib.Path(value)
    return str(value)


@dataclasses.dataclass
class TritonSecurityConfig:
    """Which endpoint groups need the access token, and the token (generated when not given)."""

    access_token: str | None = None
    restricted_endpoints: list[str] | None = None

    def __post_init__(self) -> None:
        if self.restricted_endpoints is None:
            self.restricted_endpoints = list(DEFAULT_PROTECTED_ENDPOINTS)
        unknown = [e for e in self.restricted_endpoints if e not in VALID_TRITON_ENDPOINTS]
        if unknown:
            raise PyTritonValidationError(
                f"Unknown restricted endpoint(s) {unknown}; valid: {sorted(VALID_TRITON_ENDPOINTS)}"
            )
        if self.access_token is None and self.restricted_endpoints:
            self.access_token = secrets.token_urlsafe(32)


@dataclasses.dataclass
class TritonLifecyclePolicy:
    launch_triton_on_startup: bool = True
    local_model_store: bool = False


DefaultTritonLifecyclePolicy = TritonLifecyclePolicy(launch_triton_on_startup=True, local_model_store=False)
VertextAILifecyclePolicy = TritonLifecyclePolicy(launch_triton_on_startup=False, local_model_store=True)


def server_config(config: TritonConfig, security: TritonSecurityConfig) -> ServerConfig:
    """The server configuration `Triton` starts its server with (read with the environment of this process, which
    the server inherits); the server stops when this process is gone."""
    restricted: list[str] = []
    if security.access_token and security.restricted_endpoints:
        restricted = [f"{','.join(security.restricted_endpoints)}:{TRITON_ACCESS_HEADER}={security.access_token}"]
    verbose = config.log_verbose or 0
    log_level = "DEBUG" if verbose > 1 else "INFO" if verbose > 0 else "WARNING"

    def given(value: Any, default: Any) -> Any:
        return value if value is not None else default

    return ServerConfig.from_env(
        models=[],
        allow_grpc=given(config.allow_grpc, True),
        grpc_address=config.grpc_address or "0.0.0.0",
        grpc_port=given(config.grpc_port, DEFAULT_GRPC_PORT),
        grpc_header_forward_pattern=config.grpc_header_forward_pattern,
        grpc_limits=grpc_limits_of(config),
        allow_http=given(config.allow_http, True),
        http_address=config.http_address or "0.0.0.0",
        http_port=given(config.http_port, DEFAULT_HTTP_PORT),
        http_header_forward_pattern=config.http_header_forward_pattern,
        allow_metrics=given(config.allow_metrics, True),
        allow_gpu_metrics=given(config.allow_gpu_metrics, True),
        allow_cpu_metrics=given(config.allow_cpu_metrics, True),
        metrics_interval_ms=float(given(config.metrics_interval_ms, DEFAULT_METRICS_INTERVAL_MS)),
        metrics_address=config.metrics_address or "0.0.0.0",
        metrics_port=given(config.metrics_port, DEFAULT_METRICS_PORT),
        log_level=log_level,
        exit_timeout_s=exit_timeout_of(config),
        execution_timeout_s=config.execution_timeout_secs,
        metrics_config=list(config.metrics_config or []),
        cache_config=list(config.cache_config or []),
        trace_config=list(config.trace_config or []),
        exit_with_parent=True,
        allow_sagemaker=bool(config.allow_sagemaker),
        # (TritonConfig has no address of its own for them: they listen where HTTP does)
        sagemaker_address=config.http_address or "0.0.0.0",
        vertex_ai_address=config.http_address or "0.0.0.0",
        sagemaker_port=given(config.sagemaker_port, SAGEMAKER_DEFAULT_PORT),
        sagemaker_safe_port_range=config.sagemaker_safe_port_range,
        allow_vertex_ai=given(config.allow_vertex_ai, vertex_ai_mode(os.environ)),
        vertex_ai_port=config.vertex_ai_port if config.vertex_ai_port is not None else vertex_ai_port(os.environ),
        vertex_ai_default_model=config.vertex_ai_default_model or "",
        openai_port=config.openai_port,
        openai_address=config.http_address or "0.0.0.0",
        openai_api_key=config.openai_api_key or os.environ.get("PYTRITON_OPENAI_API_KEY") or None,
        openai_tokenizer=config.openai_tokenizer,
        server_id=given(config.id, DEFAULT_SERVER_ID),
        exit_on_error=given(config.exit_on_error, True),
        strict_readiness=given(config.strict_readiness, True),
        # served beside the bound models, loaded at start (Triton's model control mode "none"); the server process
        # runs in the workspace, so the path is made absolute here
        model_repositories=[str(pathlib.Path(config.model_repository).absolute())] if config.model_repository else [],
        allow_model_upload=bool(config.allow_model_upload),
        http_restricted_api=restricted + ([config.http_restricted_api] if config.http_restricted_api else []),
        grpc_restricted_protocol=restricted + ([config.grpc_restricted_protocol] if config.grpc_restricted_protocol
                                               else []),
        grpc_tls=grpc_tls_of(config),
        http_tls=http_tls_of(config),
        openai_tls=openai_tls_of(config),
    )


def grpc_limits_of(config: TritonConfig) -> H2Limits:
    """The gRPC connection limits with the keepalive, ping and compression fields that are set."""
    level = config.grpc_infer_response_compression_level
    if level is not None and level.lower() not in INFER_COMPRESSION_LEVELS:
        raise ValueError(f"grpc_infer_response_compression_level {level!r}: expected one of "
                         f"{', '.join(INFER_COMPRESSION_LEVELS)}")
    for name in ("grpc_keepalive_time", "grpc_keepalive_timeout", "grpc_http2_max_pings_without_data",
                 "grpc_http2_min_recv_ping_interval_without_data", "grpc_http2_max_ping_strikes"):
        if (getattr(config, name) or 0) < 0:
            raise ValueError(f"{name} {getattr(config, name)}: must not be negative")
    fields = keepalive_fields(
        config.grpc_keepalive_time, config.grpc_keepalive_timeout, config.grpc_keepalive_permit_without_calls,
        config.grpc_http2_max_pings_without_data, config.grpc_http2_min_recv_ping_interval_without_data,
        config.grpc_http2_max_ping_strikes)
    if level is not None:
        fields["infer_response_compression"] = level.lower()
    return H2Limits(**fields)
def grpc_tls_of(config: TritonConfig) -> TlsSettings | None:
    """The gRPC port's TLS (grpc_use_ssl_mutual implies grpc_use_ssl, as in PyTriton); raises ValueError."""
    return TlsSettings.of(config.grpc_use_ssl, config.grpc_use_ssl_mutual, config.grpc_server_cert,
                          config.grpc_server_key, config.grpc_root_cert,
                          options=("grpc_use_ssl", "grpc_server_cert", "grpc_server_key", "grpc_root_cert"))


def http_tls_of(config: TritonConfig) -> TlsSettings | None:
    """The HTTP port's TLS (pytriton's own fields); raises ValueError."""
    return TlsSettings.of(config.http_use_ssl, config.http_use_ssl_mutual, config.http_server_cert,
                          config.http_server_key, config.http_root_cert,
                          options=("http_use_ssl", "http_server_cert", "http_server_key", "http_root_cert"))


def openai_tls_of(config: TritonConfig) -> TlsSettings | None:
    """The OpenAI port's TLS (pytriton's own fields); raises ValueError."""
    return TlsSettings.of(config.openai_use_ssl, config.openai_use_ssl_mutual, config.openai_server_cert,
                          config.openai_server_key, config.openai_root_cert,
                          options=("openai_use_ssl", "openai_server_cert", "openai_server_key", "openai_root_cert"))


def exit_timeout_of(config: TritonConfig) -> float:
    return float(config.exit_timeout_secs if config.exit_timeout_secs is not None else DEFAULT_EXIT_TIMEOUT_S)
