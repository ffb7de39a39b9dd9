"""The PyTriton user API: `Triton`, `RemoteTriton`, `TritonConfig` and the security configuration.

`Triton` starts a pytriton server process (`python -m pytriton.server`) that dies with this process. A model
bound with a Python callable is hosted by this process, one thread per callable (a list of callables is
that many instances); the threads speak the same worker protocol as spawned workers, so tensors reach the
callable through shared memory without copies. A model bound with an import path (`"module:fn"`) gets
worker processes instead. `RemoteTriton` binds models into a server that is already running on this host.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from pytriton.config.env import MALLOC_TUNABLES  # noqa: F401 - importable from here as before
from pytriton.config.server import READY_PREFIX  # noqa: F401 - importable from here as before
from pytriton.config.triton_config import (  # noqa: F401 - the names this module had before its parts moved out
    DEFAULT_GRPC_PORT,
    DEFAULT_HTTP_PORT,
    DEFAULT_METRICS_PORT,
    DEFAULT_PROTECTED_ENDPOINTS,
    MODEL_CONFIG_URL,
    MODEL_INFER_URL,
    MODEL_READY_URL,
    MODEL_URL,
    TRITON_ACCESS_HEADER,
    VALID_TRITON_ENDPOINTS,
    DefaultTritonLifecyclePolicy,
    TritonConfig,
    TritonLifecyclePolicy,
    TritonSecurityConfig,
    VertextAILifecyclePolicy,
    server_config,
)
from pytriton.exceptions import PyTritonInvalidOperationError, PyTritonRuntimeError, PyTritonValidationError
from pytriton.model_config.model_config import ModelConfig
from pytriton.model_config.tensor import Tensor
from pytriton.proxy.arena import pid_alive
from pytriton.proxy.control import (
    ControlClient,
    ControlError,
    InfoRequest,
    ModelReadyRequest,
    ServerInfo,
    UnloadRequest,
)
from pytriton.server.bound_model import BoundModel as _BoundModel
from pytriton.server.launcher import START_TIMEOUT_S, ServerLauncher
from pytriton.supervisor.run_dir import RunDirectory

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger("pytriton.triton")

MONITORING_PERIOD_S = 10.0


class _TritonBase:
    """What `Triton` and `RemoteTriton` share: binding models and loading them into a server."""

    def __init__(self, workspace: str | pathlib.Path | None = None):
        self._models: dict[str, _BoundModel] = {}
        self._control: ControlClient | None = None
        self._server: ServerInfo | None = None
        self._info: dict[str, Any] = {}
        self._lock = threading.RLock()
        self._stopped = False
        self._workspace = pathlib.Path(workspace) if workspace is not None else None

    # ---- binding -----------------------------------------------------------------------------
    def bind(
        self,
        model_name: str,
        infer_func: Callable[..., Any] | Sequence[Callable[..., Any]] | str,
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
        model_version: int = 1,
        config: ModelConfig | None = None,
        strict: bool = False,
        trace_config: list[str] | None = None,
    ) -> None:
        """Serve `infer_func` as `model_name`; loaded now if the server runs, else when it starts.

        `infer_func` is a callable (hosted by a thread of this process), a list of callables (one instance
        each) or an import path "module:fn" (served by worker processes of the server). With `strict=True`
        outputs must match the declared dtype and shape exactly; otherwise numeric outputs are cast to the
        declared dtype when that is a safe cast. `trace_config` sets this model's own trace settings with
        `--trace-config` entries (level, rate, count, log-frequency), e.g. `["level=TIMESTAMPS", "rate=1"]`; where
        traces go is the server's setting (`TritonConfig(trace_config=[...])`).
        """
        model = _BoundModel(model_name, infer_func, inputs, outputs, model_version, config or ModelConfig(), strict,
                            trace_config)
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
        assert self._control is not None
        try:
            reply = self._control.call(model.load_request(timeout_s), timeout_s)
        except ControlError as exc:  # the server's refusal, with its cause (e.g. the worker's import error)
            raise PyTritonRuntimeError(f"model '{model.name}' failed to load: {exc}") from None
        if model.target is None:
            model.start_hosts(reply)
        self._wait_model_ready(model, timeout_s)
        model.loaded = True
        logger.info("model '%s' loaded", model.name)

    def _wait_model_ready(self, model: _BoundModel, timeout_s: float) -> None:
        assert self._control is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._control.call(ModelReadyRequest(model.name), 10.0).ready:
                return
            if not model.hosts_alive():
                raise PyTritonRuntimeError(
                    f"model '{model.name}' failed to start: its inference callable could not be set up "
                    "(see the log above)"
                )
            time.sleep(0.01)
        raise TimeoutError(f"model '{model.name}' did not become ready within {timeout_s:.0f} s")

    def _unload(self, model: _BoundModel) -> None:
        if self._control is not None and model.loaded:
            try:
                self._control.call(UnloadRequest(model.name), 30.0)
            except Exception as exc:  # noqa: BLE001 - the server may be gone already
                logger.debug("unloading model '%s' failed: %s", model.name, exc)
        model.stop_hosts()
        model.loaded = False

    def _load_all(self) -> None:
        for model in list(self._models.values()):
            if not model.loaded:
                self._load(model)

    def _connect_control(self, address: str) -> None:
        self._control = ControlClient(address, alive=self._server_alive)
        self._server = self._control.call(InfoRequest(), 30.0).server
        self._info.update(dataclasses.asdict(self._server))

    def _server_alive(self) -> bool:
        """Whether the server process still exists (control calls stop waiting once it is gone)."""
        return self._server is None or pid_alive(self._server.server_pid)

    def _disconnect(self) -> None:
        for model in list(self._models.values()):
            if self._server_alive():
                self._unload(model)
            else:  # e.g. Ctrl-C reached the server too: nothing to unload, just stop our threads
                model.stop_hosts()
                model.loaded = False
        if self._control is not None:
            self._control.close()
            self._control = None

    # ---- context manager ---------------------------------------------------------------------
    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def connect(self) -> None:
        raise NotImplementedError

    def stop(self) -> bool:
        """Unload this object's models and release what it started; False if it was stopped already."""
        with self._lock:
            if self._stopped:
                return False
            self._stopped = True
            self._disconnect()
            self._release()
            return True

    def _release(self) -> None:
        """What a stop releases beyond this object's models (Triton: its server process and workspace)."""

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
        config: TritonConfig | None = None,
        workspace: str | pathlib.Path | None = None,
        triton_lifecycle_policy: TritonLifecyclePolicy | None = None,
        security_config: TritonSecurityConfig | None = None,
    ):
        super().__init__(workspace)
        self._config = config if config is not None else TritonConfig.from_env()
        self._policy = triton_lifecycle_policy or DefaultTritonLifecyclePolicy
        self._security = security_config if security_config is not None else TritonSecurityConfig()
        self._process: ServerLauncher | None = None
        self._run_dir: RunDirectory | None = None  # the workspace, when we made it

    def get_access_token(self) -> str | None:
        return self._security.access_token

    def _start_server(self) -> None:
        if self._workspace is None:
            # Named with our pid and held locked while we live: a server's start-up sweeps it if we are SIGKILLed.
            self._run_dir = RunDirectory("workspace")
            self._workspace = pathlib.Path(self._run_dir.path)
        self._workspace.mkdir(parents=True, exist_ok=True)
        log_file = pathlib.Path(self._config.log_file) if self._config.log_file else None
        self._process = ServerLauncher(server_config(self._config, self._security), self._workspace, log_file)
        info = self._process.wait_ready()
        self._info = dict(info)
        self._connect_control(info["address"])
        logger.info("pytriton server ready (pid %d; HTTP %s, gRPC %s)", info["pid"], info["http_port"],
                    info["grpc_port"])

    def _terminate_server(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.terminate()

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
        return self._process is not None and self._process.alive()

    def is_alive(self) -> bool:
        """The server process runs and every thread hosting a bound model is alive."""
        return self._server_alive() and all(m.hosts_alive() for m in self._models.values())

    def _release(self) -> None:
        """Stop the server; remove the workspace if we created it."""
        self._terminate_server()
        if self._run_dir is not None:
            self._run_dir.remove()
            self._run_dir = None
        logger.info("pytriton stopped")

    @property
    def ports(self) -> dict[str, int | None]:
        """The ports the server listens on (useful with port 0); "openai" only with `TritonConfig.openai_port`."""
        ports = {k: self._info.get(f"{k}_port") for k in ("http", "grpc", "metrics")}
        if self._info.get("openai_port") is not None:
            ports["openai"] = self._info["openai_port"]
        return ports

    def __del__(self) -> None:
        process = getattr(self, "_process", None)
        if process is not None:
            process.kill()


class RemoteTriton(_TritonBase):
    """Binds models into a pytriton server already running on this host (found through its HTTP endpoint)."""

    def __init__(self, url: str, workspace: str | pathlib.Path | None = None, access_token: str | None = None):
        super().__init__(workspace)
        self.url = url
        self._access_token = access_token

    def _connection_info(self, timeout_s: float) -> dict[str, Any]:
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
                with urllib.request.urlopen(request, timeout=5) as response:
                    return cast(dict[str, Any], json.loads(response.read()))
            except urllib.error.HTTPError as exc:
                body = exc.read().decode("utf-8", "replace")
                hint = ""
                if exc.code == 403:
                    hint = (" (the server restricts its model-repository endpoints: pass RemoteTriton(..., access_token=)"
                            " the token of the Triton() that runs it, triton.get_access_token())")
                raise PyTritonRuntimeError(
                    f"cannot join the server at {self.url}: HTTP {exc.code} {body}{hint}") from None
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

    def is_alive(self) -> bool:
        return self._control is not None and all(t.is_alive() for m in self._models.values() for t in m.threads)


__all__ = [
    "DEFAULT_PROTECTED_ENDPOINTS",
    "TRITON_ACCESS_HEADER",
    "VALID_TRITON_ENDPOINTS",
    "DefaultTritonLifecyclePolicy",
    "RemoteTriton",
    "Triton",
    "TritonConfig",
    "TritonLifecyclePolicy",
    "TritonSecurityConfig",
    "VertextAILifecyclePolicy",
]
