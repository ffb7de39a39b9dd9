"""The PyTriton user API: `Triton`, `RemoteTriton`, `TritonConfig` and the security configuration.

`Triton` starts a pytriton server process (`python -m pytriton.app`) that dies with this process. A model
bound with a Python callable is hosted by this process, one thread per callable (a list of callables is
that many instances); the threads speak the same worker protocol as spawned workers, so tensors reach the
callable through shared memory without copies. A model bound with an import path (`"module:fn"`) gets
worker processes instead. `RemoteTriton` binds models into a server that is already running on this host.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from pytriton.exceptions import PyTritonInvalidOperationError, PyTritonRuntimeError, PyTritonValidationError
from pytriton.model_config.datatypes import numpy_to_triton
from pytriton.model_config.model_config import ModelConfig
from pytriton.model_config.tensor import Tensor
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.arena import pid_alive
from pytriton.supervisor.worker_pool import MALLOC_TUNABLES

logger = logging.getLogger("pytriton.triton")

DEFAULT_HTTP_PORT = 8000
DEFAULT_GRPC_PORT = 8001
DEFAULT_METRICS_PORT = 8002
MONITORING_PERIOD_S = 10.0
START_TIMEOUT_S = 120.0
READY_PREFIX = "PYTRITON_READY "

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

# TritonConfig fields this server has no use for: accepted (so configurations keep working) and logged once.
_IGNORED_FIELDS = {
    "model_repository": "models come from bind(); there is no model repository",
    "id": "the server id is not used",
    "strict_readiness": "readiness always means: server up and every model ready",
    "exit_on_error": "a model that fails to load fails bind()/run() in any case",
    "http_thread_count": "HTTP is served by the server's event loop",
    "grpc_infer_allocation_pool_size": "not applicable to this server",
    "grpc_infer_response_compression_level": "responses are not compressed by the server",
    "grpc_keepalive_time": "grpc defaults are used",
    "grpc_keepalive_timeout": "grpc defaults are used",
    "grpc_keepalive_permit_without_calls": "grpc defaults are used",
    "grpc_http2_max_pings_without_data": "grpc defaults are used",
    "grpc_http2_min_recv_ping_interval_without_data": "grpc defaults are used",
    "grpc_http2_max_ping_strikes": "grpc defaults are used",
    "allow_gpu_metrics": "GPU metrics are not exported",
    "allow_cpu_metrics": "CPU metrics are always exported with the metrics endpoint",
    "metrics_interval_ms": "metrics are computed when scraped",
    "metrics_config": "not applicable to this server",
    "cache_config": "the response cache is not implemented",
    "cache_directory": "the response cache is not implemented",
    "buffer_manager_thread_count": "not applicable to this server",
    "trace_config": "tracing output is not implemented; trace settings are kept but not acted upon",
    "sagemaker_port": "SageMaker mode is not supported",
    "sagemaker_safe_port_range": "SageMaker mode is not supported",
    "sagemaker_thread_count": "SageMaker mode is not supported",
    "vertex_ai_port": "Vertex AI mode is not supported",
    "vertex_ai_thread_count": "Vertex AI mode is not supported",
    "vertex_ai_default_model": "Vertex AI mode is not supported",
}
_logged_ignored: set[str] = set()


@dataclasses.dataclass(kw_only=True)
class TritonConfig:
    """Server configuration; every field is optional and None means the default (as in PyTriton)."""

    model_repository: Optional[pathlib.Path] = None
    id: Optional[str] = None
    log_verbose: Optional[int] = None
    log_file: Optional[pathlib.Path] = None
    exit_timeout_secs: Optional[int] = None
    exit_on_error: Optional[bool] = None
    strict_readiness: Optional[bool] = None
    allow_http: Optional[bool] = None
    http_address: Optional[str] = None
    http_port: Optional[int] = None
    http_header_forward_pattern: Optional[str] = None
    http_thread_count: Optional[int] = None
    http_restricted_api: Optional[str] = None
    allow_grpc: Optional[bool] = None
    grpc_address: Optional[str] = None
    grpc_port: Optional[int] = None
    grpc_header_forward_pattern: Optional[str] = None
    grpc_infer_allocation_pool_size: Optional[int] = None
    grpc_use_ssl: Optional[bool] = None
    grpc_use_ssl_mutual: Optional[bool] = None
    grpc_server_cert: Optional[pathlib.Path] = None
    grpc_server_key: Optional[pathlib.Path] = None
    grpc_root_cert: Optional[pathlib.Path] = None
    grpc_infer_response_compression_level: Optional[str] = None
    grpc_keepalive_time: Optional[int] = None
    grpc_keepalive_timeout: Optional[int] = None
    grpc_keepalive_permit_without_calls: Optional[bool] = None
    grpc_http2_max_pings_without_data: Optional[int] = None
    grpc_http2_min_recv_ping_interval_without_data: Optional[int] = None
    grpc_http2_max_ping_strikes: Optional[int] = None
    grpc_restricted_protocol: Optional[str] = None
    allow_metrics: Optional[bool] = None
    allow_gpu_metrics: Optional[bool] = None
    allow_cpu_metrics: Optional[bool] = None
    metrics_interval_ms: Optional[int] = None
    metrics_port: Optional[int] = None
    metrics_address: Optional[str] = None
    allow_sagemaker: Optional[bool] = None
    sagemaker_port: Optional[int] = None
    sagemaker_safe_port_range: Optional[str] = None
    sagemaker_thread_count: Optional[int] = None
    allow_vertex_ai: Optional[bool] = None
    vertex_ai_port: Optional[int] = None
    vertex_ai_thread_count: Optional[int] = None
    vertex_ai_default_model: Optional[str] = None
    metrics_config: Optional[List[str]] = None
    trace_config: Optional[List[str]] = None
    cache_config: Optional[List[str]] = None
    cache_directory: Optional[str] = None
    buffer_manager_thread_count: Optional[int] = None

    def __post_init__(self) -> None:
        if self.allow_http is not None and self.allow_grpc is not None and not self.allow_http and not self.allow_grpc:
            raise PyTritonValidationError("The `http` or `grpc` endpoint has to be allowed.")
        if self.grpc_use_ssl or self.grpc_use_ssl_mutual:
            raise PyTritonValidationError(
                "gRPC over SSL is not supported by this server; terminate TLS in front of it (e.g. a proxy)"
            )
        if self.allow_sagemaker or self.allow_vertex_ai:
            raise PyTritonValidationError("SageMaker and Vertex AI modes are not supported by this server")
        for name, reason in _IGNORED_FIELDS.items():
            if getattr(self, name) is not None and name not in _logged_ignored:
                _logged_ignored.add(name)
                logger.warning("TritonConfig.%s is accepted but has no effect: %s", name, reason)

    def to_dict(self) -> Dict[str, Any]:
        """The fields that are set (not None)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_dict(cls, config: Dict[str, Any]) -> TritonConfig:
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
        prefix = "PYTRITON_TRITON_CONFIG_"
        values = {key[len(prefix) :].lower(): value for key, value in os.environ.items() if key.startswith(prefix)}
        return cls.from_dict(values)


def _cast(field: dataclasses.Field, value: Any) -> Any:
    if value is None:
        return None
    text = str(field.type)
    if "List" in text:
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
    if "Path" in text:
        return pathlib.Path(value)
    return str(value)


@dataclasses.dataclass
class TritonSecurityConfig:
    """Which endpoint groups need the access token, and the token (generated when not given)."""

    access_token: Optional[str] = None
    restricted_endpoints: Optional[List[str]] = None

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


# ---- models bound by the user ---------------------------------------------------------------------------
def _letters(index: int) -> str:
    out = ""
    while True:
        out = chr(ord("a") + index % 26) + out
        index = index // 26 - 1
        if index < 0:
            return out


_thread_arenas = iter(range(1 << 30))
_thread_arena_lock = threading.Lock()


def _next_arena_kind() -> str:
    with _thread_arena_lock:
        return "rspt" + _letters(next(_thread_arenas))


def _tensor_specs(tensors: Sequence[Tensor], prefix: str) -> List[TensorSpec]:
    specs = []
    for index, tensor in enumerate(tensors, start=1):
        if not isinstance(tensor, Tensor):
            raise PyTritonValidationError(f"{prefix.lower()}s must be pytriton.model_config.Tensor objects")
        name = tensor.name or f"{prefix}_{index}"
        try:
            datatype = numpy_to_triton(tensor.dtype)
        except TypeError as exc:
            raise PyTritonValidationError(f"{prefix.lower()} '{name}': {exc}") from None
        specs.append(TensorSpec(name, datatype, tuple(tensor.shape), bool(tensor.optional)))
    return specs


class _BoundModel:
    """A model given to `bind`: its server-side config and what hosts it."""

    def __init__(
        self,
        model_name: str,
        infer_func: Union[Callable, Sequence[Callable], str],
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
        model_version: int,
        config: ModelConfig,
        strict: bool,
    ):
        if any(t.optional for t in outputs):
            raise PyTritonValidationError("Output tensors cannot be optional.")
        if isinstance(infer_func, str):
            self.target: Optional[str] = infer_func
            self.functions: List[Callable] = []
            instance_count = 1
        else:
            self.target = None
            self.functions = [infer_func] if callable(infer_func) else list(infer_func)
            if not self.functions or not all(callable(f) for f in self.functions):
                raise PyTritonValidationError("infer_func has to be a callable, a sequence of callables or 'module:fn'")
            instance_count = len(self.functions)
        self.config = TritonModelConfig(
            model_name=model_name,
            inputs=_tensor_specs(inputs, "INPUT"),
            outputs=_tensor_specs(outputs, "OUTPUT"),
            model_version=model_version,
            max_batch_size=config.max_batch_size if config.batching else 0,
            instance_count=instance_count,
            decoupled=config.decoupled,
            batcher=config.batcher if config.batching else None,
            response_cache=config.response_cache,
            strict=strict,
        )
        self.threads: List[threading.Thread] = []
        self.stop_event = threading.Event()
        self.loaded = False

    @property
    def name(self) -> str:
        return self.config.model_name


class _TritonBase:
    """What `Triton` and `RemoteTriton` share: binding models and loading them into a server."""

    def __init__(self, workspace: Union[str, pathlib.Path, None] = None):
        self._models: Dict[str, _BoundModel] = {}
        self._control: Any = None
        self._info: Dict[str, Any] = {}
        self._lock = threading.RLock()
        self._workspace_given = workspace is not None
        self._workspace = pathlib.Path(workspace) if workspace is not None else None

    # ---- binding -----------------------------------------------------------------------------
    def bind(
        self,
        model_name: str,
        infer_func: Union[Callable, Sequence[Callable], str],
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
        model_version: int = 1,
        config: Optional[ModelConfig] = None,
        strict: bool = False,
        trace_config: Optional[List[str]] = None,
    ) -> None:
        """Serve `infer_func` as `model_name`; loaded now if the server runs, else when it starts.

        `infer_func` is a callable (hosted by a thread of this process), a list of callables (one instance
        each) or an import path "module:fn" (served by worker processes of the server). With `strict=True`
        outputs must match the declared dtype and shape exactly; otherwise numeric outputs are cast to the
        declared dtype when that is a safe cast.
        """
        if trace_config:
            logger.warning("bind(trace_config=...) has no effect: tracing output is not implemented")
        model = _BoundModel(model_name, infer_func, inputs, outputs, model_version, config or ModelConfig(), strict)
        with self._lock:
            old = self._models.get(model.name)
            if old is not None and self.is_connected():
                self._unload(old)
            self._models[model.name] = model
            if self.is_connected():
                self._load(model)

    def is_connected(self) -> bool:
        return self._control is not None

    def _load(self, model: _BoundModel, timeout_s: float = START_TIMEOUT_S) -> None:
        from pytriton.backends import worker  # noqa: PLC0415 - only needed once a server is connected

        if model.target is not None:
            self._control.call(
                {"op": "load", "config": model.config.to_dict(), "hosting": "spawn", "callable": model.target},
                timeout_s,
            )
        else:
            answer = self._control.call(
                {"op": "load", "config": model.config.to_dict(), "hosting": "external", "timeout": timeout_s},
                timeout_s,
            )
            model.stop_event = threading.Event()
            model.threads = []
            for index, (identity, fn) in enumerate(zip(answer["identities"], model.functions)):
                spec = {
                    "address": answer["address"],
                    "identity": identity,
                    "tag": answer["tag"],
                    "server_pid": answer["server_pid"],
                    "inline_max": answer["inline_max"],
                    "config": model.config.to_dict(),
                    "instance": index,
                    "watch": "pid",
                    "arena_kind": _next_arena_kind(),
                }
                thread = threading.Thread(
                    target=worker.serve,
                    args=(spec, fn, model.stop_event),
                    name=f"pytriton-{model.name}-{index}",
                    daemon=True,
                )
                thread.start()
                model.threads.append(thread)
        self._wait_model_ready(model, timeout_s)
        model.loaded = True
        logger.info("model '%s' loaded", model.name)

    def _wait_model_ready(self, model: _BoundModel, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._control.call({"op": "model_ready", "model": model.name}, 10.0)["ready"]:
                return
            if model.threads and not all(t.is_alive() for t in model.threads):
                raise PyTritonRuntimeError(
                    f"model '{model.name}' failed to start: its inference callable could not be set up "
                    "(see the log above)"
                )
            time.sleep(0.01)
        raise TimeoutError(f"model '{model.name}' did not become ready within {timeout_s:.0f} s")

    def _unload(self, model: _BoundModel) -> None:
        if self._control is not None and model.loaded:
            try:
                self._control.call({"op": "unload", "model": model.name}, 30.0)
            except Exception as exc:  # noqa: BLE001 - the server may be gone already
                logger.debug("unloading model '%s' failed: %s", model.name, exc)
        self._stop_threads(model)
        model.loaded = False

    @staticmethod
    def _stop_threads(model: _BoundModel) -> None:
        model.stop_event.set()
        for thread in model.threads:
            thread.join(10.0)
        model.threads = []

    def _load_all(self) -> None:
        for model in list(self._models.values()):
            if not model.loaded:
                self._load(model)

    def _connect_control(self, address: str) -> None:
        from pytriton.proxy.control import ControlClient  # noqa: PLC0415

        self._control = ControlClient(address, alive=self._server_alive)
        self._info.update(self._control.call({"op": "info"}, 30.0))

    def _server_alive(self) -> bool:
        """Whether the server process still exists (control calls stop waiting once it is gone)."""
        pid = self._info.get("pid")
        return pid is None or pid_alive(int(pid))

    def _disconnect(self) -> None:
        for model in list(self._models.values()):
            if self._server_alive():
                self._unload(model)
            else:  # e.g. Ctrl-C reached the server too: nothing to unload, just stop our threads
                self._stop_threads(model)
                model.loaded = False
        if self._control is not None:
            self._control.close()
            self._control = None

    # ---- context manager ---------------------------------------------------------------------
    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop()

    def connect(self) -> None:
        raise NotImplementedError

    def stop(self) -> bool:
        raise NotImplementedError

    def is_alive(self) -> bool:
        raise NotImplementedError

    def serve(self, monitoring_period_s: float = MONITORING_PERIOD_S) -> None:
        """Serve until SIGINT/SIGTERM (or the server dies), then stop."""
        self.connect()
        stop = threading.Event()
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous[signum] = signal.signal(signum, lambda *_: stop.set())
        try:
            while not stop.wait(min(monitoring_period_s, 0.5)):
                if not self.is_alive():
                    logger.error("the pytriton server or a model host stopped unexpectedly")
                    break
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.stop()


class Triton(_TritonBase):
    """Starts a pytriton server process and serves the models bound to it (context manager, run/serve/stop)."""

    def __init__(
        self,
        *,
        config: Optional[TritonConfig] = None,
        workspace: Union[str, pathlib.Path, None] = None,
        triton_lifecycle_policy: Optional[TritonLifecyclePolicy] = None,
        security_config: Optional[TritonSecurityConfig] = None,
    ):
        super().__init__(workspace)
        self._config = config if config is not None else TritonConfig.from_env()
        self._policy = triton_lifecycle_policy or DefaultTritonLifecyclePolicy
        self._security = security_config if security_config is not None else TritonSecurityConfig()
        self._process: Optional[subprocess.Popen] = None
        self._reader: Optional[threading.Thread] = None
        self._ready_line: Optional[str] = None
        self._ready = threading.Event()
        self._stopped = False

    def get_access_token(self) -> Optional[str]:
        return self._security.access_token

    # ---- server process ----------------------------------------------------------------------
    def _server_config(self) -> Dict[str, Any]:
        c = self._config
        restricted: List[str] = []
        if self._security.access_token and self._security.restricted_endpoints:
            restricted = [f"{','.join(self._security.restricted_endpoints)}:{TRITON_ACCESS_HEADER}="
                          f"{self._security.access_token}"]
        log_level = "INFO" if (c.log_verbose or 0) > 0 else "WARNING"
        if (c.log_verbose or 0) > 1:
            log_level = "DEBUG"
        fields: Dict[str, Any] = {
            "allow_grpc": c.allow_grpc if c.allow_grpc is not None else True,
            "grpc_address": c.grpc_address or "0.0.0.0",
            "grpc_port": c.grpc_port if c.grpc_port is not None else DEFAULT_GRPC_PORT,
            "grpc_header_forward_pattern": c.grpc_header_forward_pattern,
            "allow_http": c.allow_http if c.allow_http is not None else True,
            "http_address": c.http_address or "0.0.0.0",
            "http_port": c.http_port if c.http_port is not None else DEFAULT_HTTP_PORT,
            "http_header_forward_pattern": c.http_header_forward_pattern,
            "allow_metrics": c.allow_metrics if c.allow_metrics is not None else True,
            "metrics_address": c.metrics_address or "0.0.0.0",
            "metrics_port": c.metrics_port if c.metrics_port is not None else DEFAULT_METRICS_PORT,
            "log_level": log_level,
            "exit_timeout_s": float(c.exit_timeout_secs if c.exit_timeout_secs is not None else 30),
            "exit_with_parent": True,
            "http_restricted_api": restricted + ([c.http_restricted_api] if c.http_restricted_api else []),
            "grpc_restricted_protocol": restricted + ([c.grpc_restricted_protocol] if c.grpc_restricted_protocol
                                                      else []),
            "models": [],
        }
        return fields

    def _start_server(self) -> None:
        if self._workspace is None:
            self._workspace = pathlib.Path(tempfile.mkdtemp(prefix="pytriton-workspace-"))
        self._workspace.mkdir(parents=True, exist_ok=True)
        log_path = pathlib.Path(self._config.log_file) if self._config.log_file else None
        env = dict(os.environ)
        env.setdefault("GLIBC_TUNABLES", MALLOC_TUNABLES)
        path = [p for p in sys.path if p]
        env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *path])
        stderr = open(log_path, "ab") if log_path else None  # noqa: SIM115 - owned by the server process
        self._process = subprocess.Popen(
            [sys.executable, "-m", "pytriton.app", json.dumps(self._server_config())],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=str(self._workspace),
        )
        if stderr is not None:
            stderr.close()
        self._reader = threading.Thread(target=self._read_server_output, name="pytriton-server-output", daemon=True)
        self._reader.start()
        if not self._ready.wait(START_TIMEOUT_S) or self._ready_line is None:
            code = self._process.poll()
            self._terminate_server()
            raise PyTritonRuntimeError(
                f"the pytriton server did not start (exit code {code}); see its log above"
                + (f" or in {log_path}" if log_path else "")
            )
        info = json.loads(self._ready_line)
        self._info = info
        self._connect_control(info["address"])
        logger.info("pytriton server ready (pid %d; HTTP %s, gRPC %s)", info["pid"], info["http_port"],
                    info["grpc_port"])

    def _read_server_output(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for raw in self._process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.startswith(READY_PREFIX) and self._ready_line is None:
                self._ready_line = line[len(READY_PREFIX) :]
                self._ready.set()
            elif line:
                sys.stdout.write(line + "\n")
        self._ready.set()

    def _terminate_server(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            timeout = float(self._config.exit_timeout_secs if self._config.exit_timeout_secs is not None else 30) + 10
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                logger.warning("the pytriton server did not stop in %.0f s; killing it", timeout)
                process.kill()
                process.wait()
        if self._reader is not None:
            self._reader.join(5)
        if process.stdout is not None:
            process.stdout.close()

    # ---- lifecycle ---------------------------------------------------------------------------
    def connect(self) -> None:
        """Start the server (if not running) and load every bound model."""
        with self._lock:
            if self._stopped:
                raise PyTritonInvalidOperationError("this Triton was stopped; create a new one")
            if self._process is None:
                self._start_server()
            self._load_all()

    def run(self) -> None:
        """Start serving in the background (returns once every bound model is ready)."""
        self.connect()

    def _server_alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def is_alive(self) -> bool:
        """The server process runs and every thread hosting a bound model is alive."""
        if self._process is None or self._process.poll() is not None:
            return False
        return all(t.is_alive() for m in self._models.values() for t in m.threads)

    def stop(self) -> bool:
        """Unload models, stop their threads and the server; remove the workspace if we created it."""
        with self._lock:
            if self._stopped:
                return False
            self._stopped = True
            self._disconnect()
            self._terminate_server()
            if self._workspace is not None and not self._workspace_given:
                shutil.rmtree(self._workspace, ignore_errors=True)
            logger.info("pytriton stopped")
            return True

    @property
    def ports(self) -> Dict[str, Optional[int]]:
        """The ports the server listens on (useful with port 0)."""
        return {k: self._info.get(f"{k}_port") for k in ("http", "grpc", "metrics")}

    def __del__(self) -> None:
        process = getattr(self, "_process", None)
        if process is not None and process.poll() is None:
            process.kill()


class RemoteTriton(_TritonBase):
    """Binds models into a pytriton server already running on this host (found through its HTTP endpoint)."""

    def __init__(self, url: str, workspace: Union[str, pathlib.Path, None] = None, access_token: Optional[str] = None):
        super().__init__(workspace)
        self.url = url
        self._access_token = access_token
        self._stopped = False

    def _connection_info(self, timeout_s: float) -> Dict[str, Any]:
        url = self.url
        if url.startswith("grpc://"):
            raise PyTritonValidationError("RemoteTriton needs the server's HTTP address, e.g. 'http://localhost:8000'")
        if "://" not in url:
            url = "http://" + url
        host_port = url.split("://", 1)[1].split("/", 1)[0]
        if ":" not in host_port:
            url = url.replace(host_port, f"{host_port}:{DEFAULT_HTTP_PORT}", 1)
        request = urllib.request.Request(url.rstrip("/") + "/v2/pytriton/connection")
        if self._access_token:
            request.add_header(TRITON_ACCESS_HEADER, self._access_token)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback/host URL
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                body = exc.read().decode("utf-8", "replace")
                raise PyTritonRuntimeError(f"cannot join the server at {self.url}: HTTP {exc.code} {body}") from None
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no pytriton server answered at {self.url} within {timeout_s:.0f} s") from None
                time.sleep(0.1)

    def connect(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait for the server, then load every bound model into it."""
        with self._lock:
            if self._control is None:
                info = self._connection_info(timeout_s)
                self._connect_control(info["address"])
            self._load_all()

    def stop(self) -> bool:
        """Unload this object's models (the server keeps running)."""
        with self._lock:
            if self._stopped:
                return False
            self._stopped = True
            self._disconnect()
            return True

    def is_alive(self) -> bool:
        return self._control is not None and all(t.is_alive() for m in self._models.values() for t in m.threads)


__all__ = [
    "Triton",
    "RemoteTriton",
    "TritonConfig",
    "TritonSecurityConfig",
    "TritonLifecyclePolicy",
    "DefaultTritonLifecyclePolicy",
    "VertextAILifecyclePolicy",
    "TRITON_ACCESS_HEADER",
    "VALID_TRITON_ENDPOINTS",
    "DEFAULT_PROTECTED_ENDPOINTS",
]
