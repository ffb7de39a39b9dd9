"""What a server serves and how (`ServerConfig`): built by the CLI, or by `Triton` in the user's process and handed
to the server process as JSON; environment variables are applied where it is built, in one place
(`ServerConfig.from_env`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from pytriton.config import env as _env
from pytriton.config.h2 import H2Limits
from pytriton.config.http1 import HttpLimits
from pytriton.config.repository_limits import RepositoryLimits
from pytriton.config.tls import TlsSettings
from pytriton.model_config.triton_model_config import TritonModelConfig

# The line a server process started by `Triton` writes on stdout once it is ready, followed by its details as JSON.
READY_PREFIX = "PYTRITON_READY "
# ... or, when it could not start, this line followed by the reason as a JSON string.
FAILED_PREFIX = "PYTRITON_FAILED "
DEFAULT_SERVER_ID = "triton"  # Triton's `--id` default: the name in the server's metadata
DEFAULT_METRICS_INTERVAL_MS = 2000.0  # Triton's `--metrics-interval-ms` default


DEFAULT_BACKEND_DIRECTORY = "/opt/tritonserver/backends"  # (Triton's default)


@dataclasses.dataclass
class ModelSpec:
    """A model to serve: its configuration and the import path of its inference callable."""

    config: TritonModelConfig
    callable_target: str


@dataclasses.dataclass
class ServerConfig:
    models: list[ModelSpec]
    allow_grpc: bool = True
    grpc_address: str = "0.0.0.0"
    grpc_port: int = 8001
    grpc_header_forward_pattern: str | None = None
    grpc_limits: H2Limits = dataclasses.field(default_factory=H2Limits)  # bounds per gRPC connection
    allow_http: bool = True
    http_address: str = "0.0.0.0"
    http_port: int = 8000
    http_header_forward_pattern: str | None = None
    http_limits: HttpLimits = dataclasses.field(default_factory=HttpLimits)  # the HTTP and metrics ports' bounds
    allow_metrics: bool = True
    allow_gpu_metrics: bool = True  # nv_gpu_* per visible GPU (through NVML) on the metrics port
    allow_cpu_metrics: bool = True  # nv_cpu_utilization, nv_cpu_memory_* on the metrics port
    metrics_interval_ms: float = DEFAULT_METRICS_INTERVAL_MS  # the CPU/GPU gauges are read at most this often
    metrics_address: str = "0.0.0.0"
    metrics_port: int = 8002
    metrics_config: list[str] = dataclasses.field(default_factory=list)  # Triton's `--metrics-config KEY=VALUE`
    cache_config: list[str] = dataclasses.field(default_factory=list)  # Triton's `--cache-config local,size=BYTES`
    trace_file: str = ""  # the same as trace_config ["triton,file=..."]
    trace_config: list[str] = dataclasses.field(default_factory=list)  # Triton's --trace-config entries
    allow_client_shm: bool = True
    shm_local_only: bool = True
    http_restricted_api: list[str] = dataclasses.field(default_factory=list)
    grpc_restricted_protocol: list[str] = dataclasses.field(default_factory=list)
    log_level: str = "INFO"
    exit_timeout_s: float = 30.0  # the whole stop, workers included, ends within it
    # Settings that come from the environment (see pytriton/config/env.py) unless given explicitly.
    exit_with_parent: bool = False
    inline_max_bytes: int = _env.DEFAULT_INLINE_MAX
    worker_template: bool = True  # PYTRITON_WORKER_TEMPLATE: workers are forked from a warm template process
    pipeline_depth: int = _env.DEFAULT_PIPELINE_DEPTH
    model_stall_s: float = _env.DEFAULT_MODEL_STALL_S  # PYTRITON_MODEL_STALL_SECS (ServerCore's stall_s)
    grpc_implementation: str = _env.GRPC_IMPLEMENTATIONS[0]
    event_loop: str = _env.EVENT_LOOPS[0]  # PYTRITON_EVENT_LOOP: auto | uvloop | asyncio (pytriton.server.process.run_loop)
    execution_timeout_s: float | None = None  # an execution that runs longer is failed and its worker restarted
    server_id: str = DEFAULT_SERVER_ID  # Triton's --id: the "name" of the server metadata
    exit_on_error: bool = True  # Triton's: a model that fails to load at start stops the start (else UNAVAILABLE)
    strict_readiness: bool = True  # Triton's: the server is ready only when every model is
    # Model repositories: under model control "explicit" or "poll" the controller's; in mode "none" their models are
    # loaded at start by the server process (`TritonConfig.model_repository`; the CLI puts them in `models` instead)
    model_repositories: list[str] = dataclasses.field(default_factory=list)
    model_control_mode: str = "none"
    # mode "none" with exit_on_error off: the repositories' models that could not be read or configured, left out and
    # shown UNAVAILABLE (name -> the version shown or None, the reason; the CLI and the in-process API fill it)
    refused_models: dict[str, tuple[int | None, str]] = dataclasses.field(default_factory=dict)
    load_models: list[str] = dataclasses.field(default_factory=list)  # explicit mode: loaded at start ("*": all)
    repository_poll_secs: float = 15.0
    auto_complete_config: bool = True  # repository models' auto_complete_config completes their configuration
    # Triton's --backend-directory: a repository model whose backend is NAME (not "python") runs NAME/model.py there
    # (a Python-based backend)
    backend_directory: str = DEFAULT_BACKEND_DIRECTORY
    # Model control "explicit": loads may give the model's files (`file:` parameters), which the server then runs
    allow_model_upload: bool = False
    repository_limits: RepositoryLimits = dataclasses.field(default_factory=RepositoryLimits)  # a load's bounds
    # Triton's SageMaker and Vertex AI endpoints (pytriton/config/platforms.py; their other settings come from the
    # environment of the server process: SAGEMAKER_TRITON_*, AIP_*)
    allow_sagemaker: bool = False
    sagemaker_address: str = "0.0.0.0"
    sagemaker_port: int = 8080
    sagemaker_safe_port_range: str | None = None  # "<low>-<high>": the ports the other endpoints may use
    allow_vertex_ai: bool = False
    vertex_ai_address: str = "0.0.0.0"
    vertex_ai_port: int = 8080
    vertex_ai_default_model: str = ""  # "" = the only model served
    # The OpenAI-compatible port (pytriton/frontend/openai; off unless a port is given), the Bearer key its clients must
    # send (None: none), and the Hugging Face tokenizer whose chat template makes chat prompts (None: a plain one)
    openai_port: int | None = None
    openai_address: str = "0.0.0.0"
    openai_api_key: str | None = None
    openai_tokenizer: str | None = None
    grpc_tls: TlsSettings | None = None  # TLS / mutual TLS on the gRPC port (Triton's --grpc-use-ssl...)
    http_tls: TlsSettings | None = None  # TLS / mutual TLS on the HTTP port (pytriton's own --http-use-ssl...)
    openai_tls: TlsSettings | None = None  # TLS / mutual TLS on the OpenAI port (pytriton's own --openai-use-ssl...)
    # One of several front-end processes (`pytriton serve --frontend-processes N`; docs/multi-frontend.md), set by
    # the parent for each: its index and every process's private loopback port (empty: the only process)
    frontend_index: int = 0
    frontend_peer_ports: list[int] = dataclasses.field(default_factory=list)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **fields: Any) -> ServerConfig:
        """A config from `fields`, with the settings they leave out taken from the environment (see _env)."""
        return cls(**{**_env.server_settings(environ), **fields})

    def to_json(self) -> str:
        fields = dataclasses.asdict(self)
        fields["models"] = [{"config": m.config.to_dict(), "callable": m.callable_target} for m in self.models]
        return json.dumps(fields)

    @classmethod
    def from_json(cls, text: str) -> ServerConfig:
        """The config `to_json` wrote (the environment was applied where it was built, not here)."""
        fields = json.loads(text)
        fields["models"] = [ModelSpec(TritonModelConfig.from_dict(m["config"]), m["callable"])
                            for m in fields.get("models", [])]
        if isinstance(fields.get("http_limits"), dict):
            fields["http_limits"] = HttpLimits(**fields["http_limits"])
        if isinstance(fields.get("repository_limits"), dict):
            fields["repository_limits"] = RepositoryLimits(**fields["repository_limits"])
        if isinstance(fields.get("grpc_limits"), dict):
            fields["grpc_limits"] = H2Limits(**fields["grpc_limits"])
        for name in ("grpc_tls", "http_tls", "openai_tls"):
            if isinstance(fields.get(name), dict):
                fields[name] = TlsSettings(**fields[name])
        return cls(**fields)
