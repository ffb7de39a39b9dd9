"""`Options` of an in-process server (the seed's fields, names and defaults) and what they become: the server
process's `ServerConfig` and the logging of the `pytriton` loggers. Fields that cannot apply to this server are
accepted and warned about once per process when set to anything but their default."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time
import warnings
from typing import Any

from pytriton.tritonserver._enums import InstanceGroupKind, LogFormat, ModelControlMode, RateLimitMode
from pytriton.tritonserver._errors import InvalidArgumentError


@dataclasses.dataclass
class RateLimiterResource:
    """A resource count for rate limiting (accepted; pytriton has no rate limiter)."""

    name: str
    count: int
    device: int


@dataclasses.dataclass
class ModelLoadDeviceLimit:
    """A device memory limit for model loading (accepted; not enforced)."""

    kind: InstanceGroupKind
    device: int
    fraction: float


@dataclasses.dataclass
class Options:
    """Server options; see the guide (docs/guide/in-process.md) for which ones take effect here."""

    model_repository: str | list[str] = dataclasses.field(default_factory=list)
    server_id: str = "triton"
    model_control_mode: ModelControlMode = ModelControlMode.NONE
    startup_models: list[str] = dataclasses.field(default_factory=list)
    strict_model_config: bool = False  # Triton's in-process default: models' auto_complete_config completes them
    rate_limiter_mode: RateLimitMode = RateLimitMode.OFF
    rate_limiter_resources: list[RateLimiterResource] = dataclasses.field(default_factory=list)
    pinned_memory_pool_size: int = 1 << 28
    cuda_memory_pool_sizes: dict[int, int] = dataclasses.field(default_factory=dict)
    cache_config: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    cache_directory: str = "/opt/tritonserver/caches"
    min_supported_compute_capability: float = 6.0
    exit_on_error: bool = True
    strict_readiness: bool = True
    exit_timeout: int = 30
    buffer_manager_thread_count: int = 0
    model_load_thread_count: int = 4
    model_load_retry_count: int = 0
    model_namespacing: bool = False
    enable_peer_access: bool = True
    log_file: str | None = None
    log_info: bool = False
    log_warn: bool = False
    log_error: bool = False
    log_format: LogFormat = LogFormat.DEFAULT
    log_verbose: int = 0
    metrics: bool = True
    gpu_metrics: bool = True
    cpu_metrics: bool = True
    metrics_interval: int = 2000
    backend_directory: str = "/opt/tritonserver/backends"
    repo_agent_directory: str = "/opt/tritonserver/repoagents"
    model_load_device_limits: list[ModelLoadDeviceLimit] = dataclasses.field(default_factory=list)
    backend_configuration: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    host_policies: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    metrics_configuration: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    # pytriton's own (`pytriton serve --allow-model-upload`): `load()` parameters may give the model's files
    # (`file:1/model.py`), in this process and from the network front-ends started beside it; off by default
    allow_model_upload: bool = False


# Fields this server accepts but does not act on, with the reason given in the warning.
INERT_FIELDS = {
    "rate_limiter_mode": "pytriton has no rate limiter",
    "rate_limiter_resources": "pytriton has no rate limiter",
    "pinned_memory_pool_size": "tensors travel in POSIX shared memory, not in a pinned pool",
    "cuda_memory_pool_sizes": "pytriton keeps no CUDA memory pool",
    "cache_directory": "the response cache is built in (the local cache)",
    "min_supported_compute_capability": "GPUs are not checked for a compute capability",
    "buffer_manager_thread_count": "pytriton has no buffer manager threads",
    "model_load_thread_count": "models load one at a time",
    "model_load_retry_count": "a failed load is not retried",
    "model_namespacing": "model names are global",
    "enable_peer_access": "pytriton does not set up GPU peer access",
    "repo_agent_directory": "pytriton has no repository agents",
    "model_load_device_limits": "device memory is not limited",
    "backend_configuration": "the Python backend takes no configuration",
    "host_policies": "pytriton has no host policies",
}
_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_inert(options: Options) -> None:
    """Warn (once per field and process) of each inert field set to something else than its default."""
    defaults = Options()
    for name, reason in INERT_FIELDS.items():
        if getattr(options, name) == getattr(defaults, name):
            continue
        with _warned_lock:
            if name in _warned:
                continue
            _warned.add(name)
        warnings.warn(f"tritonserver.Options.{name} is accepted but has no effect: {reason}", UserWarning,
                      stacklevel=3)


def control_mode(options: Options) -> str:
    """The ServerConfig model control mode of the option."""
    mode = ModelControlMode(options.model_control_mode)
    return {ModelControlMode.NONE: "none", ModelControlMode.POLL: "poll", ModelControlMode.EXPLICIT: "explicit"}[mode]


def metrics_config(options: Options) -> list[str]:
    """Triton's `--metrics-config` entries from `metrics_configuration` (its "" group holds the global keys)."""
    entries = []
    for group, settings in options.metrics_configuration.items():
        for key, value in settings.items():
            entries.append(f"{key}={value}" if not group else f"{group},{key}={value}")
    return entries


# ---- logging ---------------------------------------------------------------------------------------------------
_SEVERITY = {logging.DEBUG: "V", logging.INFO: "I", logging.WARNING: "W", logging.ERROR: "E", logging.CRITICAL: "E"}


class TritonLogFormatter(logging.Formatter):
    """Triton's log line: `I1125 20:36:05.123456 1234 file.py:12] message` (DEFAULT) or
    `2026-11-25T20:36:05Z I 1234 file.py:12] message` (ISO8601)."""

    def __init__(self, log_format: LogFormat):
        super().__init__()
        self.iso = LogFormat(log_format) == LogFormat.ISO8601

    def format(self, record: logging.LogRecord) -> str:
        severity = _SEVERITY.get(record.levelno, "I")
        where = f"{os.path.basename(record.pathname)}:{record.lineno}"
        if self.iso:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
            head = f"{stamp} {severity} {record.process} {where}]"
        else:
            local = time.localtime(record.created)
            micros = int((record.created % 1) * 1_000_000)
            head = f"{severity}{time.strftime('%m%d %H:%M:%S', local)}.{micros:06d} {record.process} {where}]"
        text = f"{head} {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def log_level(options: Options) -> int:
    """The level of the `pytriton` loggers: each log_* flag enables its level and those above it (as Triton
    cascades them); nothing enabled shows nothing."""
    if options.log_verbose > 0:
        return logging.DEBUG
    if options.log_info:
        return logging.INFO
    if options.log_warn:
        return logging.WARNING
    if options.log_error:
        return logging.ERROR
    return logging.CRITICAL + 1


class ServerLogging:
    """The `pytriton` logger configured for one server's lifetime (level, a stderr or file handler), restored at
    its stop."""

    def __init__(self, options: Options):
        self.logger = logging.getLogger("pytriton")
        self.level = log_level(options)
        self.handler: logging.Handler = (logging.FileHandler(options.log_file) if options.log_file
                                         else logging.StreamHandler(sys.stderr))
        self.handler.setFormatter(TritonLogFormatter(options.log_format))
        self._saved: tuple[int, bool] | None = None

    def install(self) -> None:
        self._saved = (self.logger.level, self.logger.propagate)
        self.logger.setLevel(self.level)
        self.logger.propagate = False  # the server's lines go where the options say, once
        self.logger.addHandler(self.handler)

    def remove(self) -> None:
        self.logger.removeHandler(self.handler)
        self.handler.close()
        if self._saved is not None:
            self.logger.setLevel(self._saved[0])
            self.logger.propagate = self._saved[1]
            self._saved = None

    @property
    def worker_level(self) -> str:
        """The log level name worker processes are started with."""
        return logging.getLevelName(min(self.level, logging.CRITICAL))


__all__ = ["ModelLoadDeviceLimit", "Options", "RateLimiterResource", "ServerLogging", "warn_inert"]
