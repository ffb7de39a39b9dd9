"""`Server`: an in-process server over pytriton's core (see `_runtime` for the loop thread it runs on)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from pytriton.config.cache import cache_config_items, parse_cache_config
from pytriton.config.server import ModelSpec, ServerConfig
from pytriton.repository import ModelRepositoryError, load_repositories
from pytriton.supervisor.worker_pool import WorkerStartError
from pytriton.tritonserver._enums import MetricFormat
from pytriton.tritonserver._errors import (
    InternalError,
    InvalidArgumentError,
    UnavailableError,
    UnsupportedError,
)
from pytriton.tritonserver._model import Model
from pytriton.tritonserver._option_checks import check_repositories, check_types
from pytriton.tritonserver._options import (
    ModelLoadDeviceLimit,
    Options,
    RateLimiterResource,
    ServerLogging,
    control_mode,
    metrics_config,
    warn_inert,
)
from pytriton.tritonserver._pybind import check_method
from pytriton.tritonserver._runtime import ServerRuntime, stop_at_exit

if TYPE_CHECKING:
    import weakref

# In mode POLL the repository is polled when `poll_model_repository()` is called (as Triton's in-process server
# does: the periodic poll is the tritonserver program's, not the library's), so the background poll never comes.
_NEVER_S = 365 * 24 * 3600.0
# Triton's error when a model of the repositories does not load at start (core model_repository_manager.cc)
FAILED_TO_LOAD_ALL = "failed to load all models"


class ModelDictionary(dict[tuple[str, int], Model]):
    """`models()`: Model objects keyed by (name, version); a bare name gives that model's latest version."""

    def __init__(self, server: Server, models: list[Model]) -> None:
        super().__init__()
        for model in models:
            self[model.name, model.version] = model
        self._server = server
        self._names = {name for name, _ in self.keys()}

    def __getitem__(self, key: Any) -> Model:
        if isinstance(key, tuple):
            try:
                return dict.__getitem__(self, key)
            except KeyError:
                raise KeyError(f"Unknown Model: {key}") from None
        if key in self._names:
            return Model(self._server, key, -1)
        raise KeyError(f"Unknown Model: {key}")


class Server:
    """Triton Inference Server in this process: models, metadata and metrics (see the seed's API)."""

    _UNLOADED_STATES = (None, "UNAVAILABLE")

    def __init__(self, options: Options | None = None, **kwargs: Any) -> None:
        self.options: Options = options if options is not None else Options(**kwargs)
        self._runtime: ServerRuntime | None = None
        self._finalizer: weakref.finalize[..., object] | None = None

    # ---- life cycle ------------------------------------------------------------------------------
    def start(self, wait_until_ready: bool = False, polling_interval: float = 0.1, timeout: float | None = None
              ) -> Server:  # fmt: skip
        """Start the server and load models as the model control mode says; InvalidArgumentError on a bad option
        or if already started, UnavailableError if not ready within `timeout`."""
        if self._runtime is not None:
            raise InvalidArgumentError("Server already started")
        options = self.options
        check_types(options)  # Triton's TypeError for a field of the wrong type, before anything else
        folders = check_repositories(options)
        warn_inert(options)
        mode = control_mode(options)
        auto_complete = not options.strict_model_config  # as `pytriton serve --strict-model-config`
        models: list[ModelSpec] = []
        refused: dict[str, tuple[int | None, str]] = {}  # (exit_on_error off: left out, shown UNAVAILABLE)
        if mode == "none":
            try:
                models = [ModelSpec(m.config, m.target) for m in
                          load_repositories(folders, auto_complete, None if options.exit_on_error else refused,
                                            options.backend_directory)]
            except ModelRepositoryError as exc:
                # Triton's words; which model and why are in the cause (Triton logs them)
                raise InternalError(FAILED_TO_LOAD_ALL) from exc
        caches = cache_config_items(options.cache_config)
        try:
            parse_cache_config(caches)
        except ValueError as exc:
            raise InvalidArgumentError(str(exc)) from None
        logs = ServerLogging(options)
        fields: dict[str, Any] = dict(
            models=models, allow_grpc=False, allow_http=False, allow_metrics=False,
            allow_gpu_metrics=options.gpu_metrics, metrics_config=metrics_config(options),
            cache_config=caches,
            log_level=logs.worker_level, exit_timeout_s=float(options.exit_timeout),
            model_repositories=folders if mode != "none" else [], model_control_mode=mode, refused_models=refused,
            backend_directory=options.backend_directory,
            load_models=list(options.startup_models), repository_poll_secs=_NEVER_S,
            server_id=options.server_id, exit_on_error=options.exit_on_error,
            strict_readiness=options.strict_readiness, allow_cpu_metrics=options.cpu_metrics,
            metrics_interval_ms=float(options.metrics_interval),
            allow_model_upload=bool(options.allow_model_upload), auto_complete_config=auto_complete,
        )
        config = ServerConfig.from_env(**fields)
        logs.install()
        runtime = ServerRuntime(config, on_stopped=logs.remove)
        try:
            runtime.start()
        except (ModelRepositoryError, WorkerStartError) as exc:  # a model's configuration, or its initialize()
            runtime.stop()
            raise InternalError(FAILED_TO_LOAD_ALL) from exc
        except BaseException:
            runtime.stop()
            raise
        self._runtime = runtime
        self._finalizer = stop_at_exit(self, runtime)
        started = time.monotonic()
        while wait_until_ready and not self.ready() and (timeout is None or time.monotonic() - started < timeout):
            time.sleep(polling_interval)
        if wait_until_ready and not self.ready():
            raise UnavailableError("Timeout before ready")
        return self

    def stop(self) -> Server:
        """Stop the server: requests in flight finish (within exit_timeout), models unload, workers exit."""
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime.stop()
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        return self

    def _started(self) -> ServerRuntime:
        runtime = self._runtime
        if runtime is None or runtime.stopped:
            raise InvalidArgumentError("Server not started")
        return runtime

    # ---- health and metadata -----------------------------------------------------------------------
    def live(self) -> bool:
        runtime = self._started()
        return bool(runtime.run(lambda: runtime.core is not None and runtime.core.live))

    def ready(self) -> bool:
        runtime = self._started()
        return bool(runtime.run(lambda: runtime.core is not None and runtime.core.ready))

    def metadata(self) -> dict[str, Any]:
        runtime = self._started()
        metadata: dict[str, Any] = runtime.run(lambda: runtime.core.server_metadata())
        metadata["name"] = self.options.server_id
        return metadata

    def metrics(self, metric_format: MetricFormat = MetricFormat.PROMETHEUS) -> str:
        """Server and model metrics in Prometheus text format ("" when the `metrics` option is off)."""
        runtime = self._started()
        check_method("TRITONSERVER_Metrics", "formatted", [MetricFormat], "str", metric_format)
        if not self.options.metrics:
            return ""
        from pytriton.tritonserver._metrics import render

        return runtime.run(render, runtime.core, self.options.gpu_metrics, self.options.cpu_metrics)

    # ---- models ------------------------------------------------------------------------------------
    def model(self, model_name: str, model_version: int = -1) -> Model:
        self._started()
        return Model(self, model_name, model_version)

    def models(self, exclude_not_ready: bool = False) -> ModelDictionary:
        runtime = self._started()
        index = runtime.run(lambda: runtime.core.repository_index(exclude_not_ready))
        models = [Model(self, entry["name"], int(entry.get("version", -1)), entry.get("state") or None,
                        entry.get("reason") or None) for entry in index]
        return ModelDictionary(self, models)

    def load(self, model_name: str, parameters: dict[str, str | int | bool | bytes] | None = None) -> Model:
        """Load (or reload) a model of the repositories and wait for it to be ready (mode EXPLICIT)."""
        runtime = self._started()
        check_method("TRITONSERVER_Server", "load_model" if parameters is None else "load_model_with_parameters",
                     ["str"], "None", model_name)
        params: dict[str, str | bytes] = {}
        for key, value in (parameters or {}).items():
            params[key] = value if isinstance(value, (str, bytes)) else str(value).lower() if isinstance(
                value, bool) else str(value)

        async def load() -> None:
            await runtime.core.repository_control().load(model_name, params)

        runtime.call(load())
        return self.model(model_name)

    def unload(self, model: str | Model, unload_dependents: bool = False, wait_until_unloaded: bool = False,
               polling_interval: float = 0.1, timeout: float | None = None) -> None:
        runtime = self._started()
        name = model if isinstance(model, str) else model.name  # (anything else: AttributeError, as Triton's)
        check_method("TRITONSERVER_Server", "unload_model_and_dependents" if unload_dependents else "unload_model",
                     ["str"], "None", name)

        async def unload() -> None:
            await runtime.core.repository_control().unload(name, unload_dependents)

        runtime.call(unload())
        if wait_until_unloaded:
            keys = [key for key in self.models() if key[0] == name]
            started = time.monotonic()
            while not self._unloaded(keys) and (timeout is None or time.monotonic() - started < timeout):
                time.sleep(polling_interval)

    def _unloaded(self, keys: list[tuple[str, int]]) -> bool:
        models = self.models()
        return all(key not in models or models[key].state in self._UNLOADED_STATES for key in keys)

    # ---- repositories ------------------------------------------------------------------------------
    def _model_control(self, action: str) -> Any:
        runtime = self._started()
        control = runtime.core.repository if runtime.core is not None else None
        if control is None or getattr(control, "mode", "") != "explicit":
            raise UnsupportedError(f"repository {action} is not allowed if model control mode is not EXPLICIT")
        return control

    def register_model_repository(self, repository_path: str, name_mapping: dict[str, str] | None = None) -> None:
        """Serve the models of another repository (mode EXPLICIT); `name_mapping` maps a model folder (subdirectory)
        to the name its model is served under (its config.pbtxt's name is replaced by it, as in Triton)."""
        self._started()
        check_method("TRITONSERVER_Server", "register_model_repository", ["str"], "None", repository_path)
        control = self._model_control("registration")
        path = os.path.abspath(os.fspath(repository_path))
        if not os.path.isdir(path):
            raise InvalidArgumentError(f"failed to register '{repository_path}', repository not found")
        for subdir, name in (name_mapping or {}).items():
            if not isinstance(name, str) or not isinstance(subdir, str):
                raise InvalidArgumentError(f"Mapped model name must be a string, found another type for {subdir}")
            if os.sep in subdir or subdir in ("", ".", ".."):
                raise InvalidArgumentError(f"failed to register '{repository_path}': '{subdir}' is not a model "
                                           "folder of the repository")
        self._started().run(control.register, path, dict(name_mapping or {}))

    def unregister_model_repository(self, repository_path: str) -> None:
        self._started()
        check_method("TRITONSERVER_Server", "unregister_model_repository", ["str"], "None", repository_path)
        control = self._model_control("unregistration")
        path = os.path.abspath(os.fspath(repository_path))
        if path not in self._started().run(lambda: list(control.folders)):
            raise InvalidArgumentError(f"failed to unregister '{repository_path}', repository not found")
        self._started().run(control.unregister, path)

    def poll_model_repository(self) -> None:
        """Load new and changed models and unload removed ones (mode POLL)."""
        runtime = self._started()
        control = runtime.core.repository if runtime.core is not None else None
        if control is None or getattr(control, "mode", "") != "poll":
            raise UnsupportedError("poll is only allowed when model control mode is POLL")

        async def poll() -> None:
            async with control._lock:  # one load or unload at a time, as the controller's own poll does
                await control._poll_once()

        runtime.call(poll())

    def __enter__(self) -> Server:
        return self if self._runtime is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["ModelDictionary", "ModelLoadDeviceLimit", "Options", "RateLimiterResource", "Server"]
