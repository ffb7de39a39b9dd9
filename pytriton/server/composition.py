"""The server composed: the core, the worker supervisor and the front-ends of one server, started and stopped together.

`Server` is the programmatic API (async start/stop), run in this process's event loop by the server process
(`pytriton.server.process`) and by the in-process API (`pytriton.tritonserver`). A stop is graceful: new requests
are refused, in-flight ones finish (bounded by `exit_timeout_s`), workers exit, and the run directory, sockets and
shared-memory segments are removed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import logging
import os
import secrets
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from pytriton.config.cache import parse_cache_config
from pytriton.config.gpus import gpu_available
from pytriton.config.metrics import MetricsSettings
from pytriton.config.server import FAILED_PREFIX, READY_PREFIX, ModelSpec, ServerConfig
from pytriton.core.ensemble import TARGET_PREFIX as ENSEMBLE_TARGET
from pytriton.core.ensemble import Ensemble
from pytriton.core.response_cache import ResponseCache
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.core.trace import TraceConfig, Tracer, TraceSink, parse_trace_config
from pytriton.core.trace_file import TraceFileWriter
from pytriton.exceptions import PyTritonError
from pytriton.frontend.access import GRPC_HEADER_PREFIX, AccessPolicy
from pytriton.frontend.grpc.server import GrpcFrontend
from pytriton.frontend.http.app import HttpApp
from pytriton.frontend.http1 import HttpListener
from pytriton.frontend.metrics.server import MetricsApp
from pytriton.proxy.arena import sweep_dead_segments, unlink_segments
from pytriton.server.control_service import ControlService
from pytriton.server.peers import LOCKED, FrontendPeers
from pytriton.server.platform_listeners import check_ports, start_platform_listeners
from pytriton.supervisor.host import WorkerHost
from pytriton.supervisor.model_loading import ModelLoadingBridge
from pytriton.supervisor.run_dir import RunDirectory, sweep_stale_run_dirs

if TYPE_CHECKING:
    from pytriton.repository.control import ModelControl

# Imported where they are used, not here: the model repository (pytriton.repository: loading, auto-complete, model
# control) and the OpenAI front-end. A server without them (Triton.bind's) never imports them.

logger = logging.getLogger("pytriton.server")

# The part of the exit timeout kept for stopping workers and front-ends (at most a quarter of it); requests in
# flight get the rest. Front-ends get up to FRONTEND_CLOSE_S of the reserve to send the last answers and close.
# A stop after a failed start-up gets START_FAILURE_STOP_S in all (or the exit timeout if shorter).
STOP_RESERVE_S = 5.0
FRONTEND_CLOSE_S = 1.0
START_FAILURE_STOP_S = 5.0
STOP_OVERRUN_S = 1.0


def _trace_sink(config: TraceConfig, settings: TraceSettings) -> TraceSink | None:
    """Where traces go: OpenTelemetry spans, a Triton trace file, or nowhere (no file given)."""
    if config.mode == "opentelemetry":
        from pytriton.core.trace_otel import OtelSpanExporter

        return OtelSpanExporter(config)
    if config.file:
        return TraceFileWriter(config.file, lambda: int(settings.global_values["log_frequency"]))
    if "OFF" not in config.level:
        logger.warning("trace level %s without a trace file: no trace is written (--trace-config triton,file=PATH)",
                       ",".join(config.level))
    return None


class Server:
    """One pytriton server in this process's event loop."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.tag = secrets.token_hex(4)
        self.run_dir: RunDirectory | None = None
        self.core: ServerCore | None = None
        self.host: WorkerHost | None = None
        self.control: ControlService | None = None
        self.model_control: ModelControl | None = None
        self.model_loading: ModelLoadingBridge | None = None  # models' pb_utils.load_model & co, once started
        self.grpc: GrpcFrontend | None = None
        self.http: HttpListener | None = None
        self.metrics: HttpListener | None = None
        self.openai: HttpListener | None = None  # the OpenAI-compatible port (`openai_port`)
        self.attached: list[GrpcFrontend | HttpListener] = []  # started later, by the in-process tritonfrontend
        self.log_settings = LogSettings(config.log_level)
        self.trace_config = parse_trace_config(config.trace_config, config.trace_file)
        self.trace_settings: TraceSettings = TraceSettings.from_config(self.trace_config)
        self.tracer = Tracer(self.trace_settings)  # its sink is made at start

    @property
    def grpc_port(self) -> int | None:
        return self.grpc.port if self.grpc else None

    @property
    def http_port(self) -> int | None:
        return self.http.port if self.http else None

    @property
    def metrics_port(self) -> int | None:
        return self.metrics.port if self.metrics else None

    @property
    def openai_port(self) -> int | None:
        return self.openai.port if self.openai else None

    async def start(self) -> None:
        """Start workers and front-ends; on any failure everything started so far is stopped again."""
        check_ports(self.config)  # Triton's port checks (SageMaker's safe port range), before anything starts
        sweep_dead_segments()
        sweep_stale_run_dirs()
        self.run_dir = RunDirectory(self.tag)
        try:
            config = self.config
            self.host = host = WorkerHost(self.run_dir.path, self.tag, config.inline_max_bytes, config.log_level,
                                          worker_template=config.worker_template)
            await host.start()
            self.log_settings.listeners.append(host.follow_log_settings)
            self.core = core = ServerCore(
                allow_client_shm=config.allow_client_shm,
                gpu_available=gpu_available(),
                pipeline_depth=config.pipeline_depth,
                execution_timeout_s=config.execution_timeout_s,
                metrics=MetricsSettings.parse(config.metrics_config),
                response_cache=_response_cache(config.cache_config),
                server_name=config.server_id,
                strict_readiness=config.strict_readiness,
                stall_s=config.model_stall_s,
            )
            core.shm.on_removed.append(lambda region: host.unmap_regions([region.id]))
            core.received.attach(host.received)  # large messages are received into shared memory
            host.serve_bls(core.infer, core.infer_stream)  # models' own requests (pb_utils BLS)
            host.serve_custom_metrics(core.custom_metrics)  # models' pb_utils.MetricFamily
            self.model_loading = host.serve_model_loading(core.repository_control, core.model_ready)
            self.tracer.attach(_trace_sink(self.trace_config, self.trace_settings),
                               always_trace_propagated=self.trace_config.mode == "opentelemetry")
            await core.start()
            self.control = ControlService(core, host, self.trace_settings)
            refused = dict(config.refused_models)
            await self._add_models(core, host, _models_at_start(config, refused))
            for name, (version, reason) in refused.items():
                logger.error("model '%s' failed to load and is UNAVAILABLE (exit on error is off): %s", name, reason)
                core.model_failed(name, version, reason)
            if config.model_control_mode != "none":
                from pytriton.repository.control import ModelControl

                self.model_control = ModelControl(core, host, config.model_repositories, config.model_control_mode,
                                                  config.repository_poll_secs, config.exit_timeout_s,
                                                  auto_complete=config.auto_complete_config,
                                                  exit_on_error=config.exit_on_error,
                                                  allow_uploads=config.allow_model_upload,
                                                  limits=config.repository_limits,
                                                  upload_parent=self.run_dir.path,
                                                  backend_directory=config.backend_directory)
                core.repository = self.model_control
                await self.model_control.start(config.load_models)
            peers = FrontendPeers.of(core, config.frontend_index, config.frontend_peer_ports)
            local_metrics = None
            if config.allow_metrics or peers is not None:
                local_metrics = MetricsApp(self.core, gpu_metrics=config.allow_metrics and config.allow_gpu_metrics,
                                           cpu_metrics=config.allow_metrics and config.allow_cpu_metrics,
                                           interval_s=config.metrics_interval_ms / 1000.0)
            if peers is not None:  # one of several front-end processes: the others read its statistics there
                self.log_settings.locked = self.trace_settings.locked = f"logging and trace settings {LOCKED}"
                core.peers = peers
                self.attached.append(await peers.start(local_metrics))
            if config.allow_grpc:
                self.grpc = GrpcFrontend(
                    self.core,
                    config.grpc_address,
                    config.grpc_port,
                    self.log_settings,
                    self.trace_settings,
                    header_forward_pattern=config.grpc_header_forward_pattern,
                    access=AccessPolicy.from_specs(
                        config.grpc_restricted_protocol, config.shm_local_only, GRPC_HEADER_PREFIX, "protocol"
                    ),
                    implementation=config.grpc_implementation,
                    limits=config.grpc_limits,
                    tracer=self.tracer,
                    reuse_port=peers is not None,
                    tls=config.grpc_tls,
                )
                await self.grpc.start()
                await self.grpc.set_serving(True)
            def http_app() -> HttpApp:
                return HttpApp(
                    core,
                    self.log_settings,
                    self.trace_settings,
                    header_forward_pattern=config.http_header_forward_pattern,
                    max_input_bytes=config.http_limits.max_input_bytes,
                    access=AccessPolicy.from_specs(config.http_restricted_api, config.shm_local_only),
                    connection_info={"address": host.address, "tag": self.tag} if peers is None else
                    {"refused": "a RemoteTriton cannot bind models to a server of several front-end processes "
                                "(--frontend-processes): each process would need them"},
                    tracer=self.tracer,
                )

            if config.allow_http:
                app = http_app()
                self.http = HttpListener(app.handle, config.http_address, config.http_port, "HTTPService",
                                         config.http_limits, too_large_hint=app.too_large_hint,
                                         reuse_port=peers is not None, tls=config.http_tls, received=core.received,
                                         begin=app.begin)
                await self.http.start()
            if config.allow_metrics and local_metrics is not None:
                limits = dataclasses.replace(config.http_limits, max_input_bytes=MetricsApp.max_input_bytes)
                handler = peers.metrics_handler(local_metrics) if peers is not None else local_metrics.handle
                self.metrics = HttpListener(handler, config.metrics_address, config.metrics_port,
                                            "Metrics Service", limits, protocol="metrics")
                await self.metrics.start()
            if config.allow_sagemaker or config.allow_vertex_ai:
                self.attached += await start_platform_listeners(config, http_app, core)
            if config.openai_port is not None:
                from pytriton.server.openai_listener import start_openai_listener

                self.openai = await start_openai_listener(config, core, self.tracer)
                self.attached.append(self.openai)  # (stopped with the others)
        except BaseException:
            await self.stop(timeout_s=min(START_FAILURE_STOP_S, self.config.exit_timeout_s))
            raise
        if self.model_loading is not None:
            self.model_loading.started = True  # (before, Triton's "Server not ready")
        if self.config.frontend_peer_ports:
            logger.info("front-end process %d is ready", self.config.frontend_index)
        else:
            logger.info("pytriton server ready")

    async def _add_models(self, core: ServerCore, host: WorkerHost, specs: list[ModelSpec]) -> None:
        """Serve the models given at start. Models of their own start side by side (their workers import and
        initialize at once), at most as many at a time as this process may use cores; an ensemble starts after every
        model given before it (its steps come before it: `serving_order`). With `exit_on_error`, the first model that
        failed stops the start once the models starting beside it have started."""
        bound = asyncio.Semaphore(usable_cores())
        pending: list[Coroutine[Any, Any, None]] = []

        async def one(spec: ModelSpec) -> None:
            async with bound:
                await self._add_model(core, host, spec)

        async def settle() -> None:
            results = await asyncio.gather(*pending, return_exceptions=True)
            pending.clear()
            for result in results:
                if isinstance(result, BaseException):
                    raise result

        for spec in specs:
            if spec.callable_target.startswith(ENSEMBLE_TARGET):
                await settle()
                await self._add_model(core, host, spec)
            else:
                pending.append(one(spec))
        await settle()

    async def _add_model(self, core: ServerCore, host: WorkerHost, spec: ModelSpec) -> None:
        """Serve a model given at start; one that fails to load stops the start, or with `exit_on_error` false is
        left out, UNAVAILABLE with its reason (as Triton)."""
        target = spec.callable_target
        source = Ensemble(spec.config, target[len(ENSEMBLE_TARGET):]) if target.startswith(ENSEMBLE_TARGET) \
            else host.worker_pool(spec.config, target)
        try:
            await core.add_model(spec.config, source)
        except Exception as exc:
            if self.config.exit_on_error:
                raise
            logger.error("model '%s' failed to load and is UNAVAILABLE (exit on error is off): %s",
                         spec.config.model_name, exc)
            core.model_failed(spec.config.model_name, spec.config.model_version, str(exc) or type(exc).__name__)

    async def stop(self, timeout_s: float | None = None) -> None:
        """Drain in-flight requests, stop workers and front-ends, remove every resource of ours.

        The whole stop ends within `timeout_s` (default: the exit timeout). Requests get all of it but a reserve;
        in the reserve, workers are asked to exit and killed if they have not by their deadline (which fails the
        requests they still ran), then the front-ends send those answers and close.
        """
        budget = self.config.exit_timeout_s if timeout_s is None else timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        reserve = min(STOP_RESERVE_S, budget / 4)
        core = self.core
        try:
            if core is not None:
                for frontend in (self.grpc, *self.attached):
                    if isinstance(frontend, GrpcFrontend):
                        await frontend.set_serving(False)
                await core.drain(max(0.0, budget - reserve))
            try:
                await self._stop_core(deadline - min(FRONTEND_CLOSE_S, reserve / 2))
                if core is not None:  # requests the workers' stop failed: let their answers go out
                    await core.drain(max(0.0, deadline - loop.time()) / 2)
            finally:
                await self._stop_frontends(deadline)
        finally:
            try:
                try:
                    await asyncio.to_thread(self.tracer.close)  # the last trace file, the last spans
                except RuntimeError:  # at interpreter exit (an in-process server's finalizer): no new thread
                    self.tracer.close()
            finally:
                unlink_segments(self.tag)
            if self.run_dir is not None:
                self.run_dir.remove()
                self.run_dir = None
        logger.info("pytriton server stopped")

    async def _stop_frontends(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        frontends = (self.grpc, self.http, self.metrics, *self.attached)
        self.grpc, self.http, self.metrics, self.attached = None, None, None, []
        grace_s = max(0.0, min(FRONTEND_CLOSE_S, deadline - loop.time()))
        stops = [asyncio.ensure_future(f.stop(grace_s=grace_s) if isinstance(f, GrpcFrontend) else f.stop())
                 for f in frontends if f is not None]
        if stops:
            # Listening sockets and connections close at once; only the wait for them to be closed is cut short.
            _, pending = await asyncio.wait(stops, timeout=max(0.0, deadline - loop.time()))
            for stop in pending:
                stop.cancel()
            for failure in await asyncio.gather(*stops, return_exceptions=True):
                if isinstance(failure, Exception):
                    logger.error("stopping a front-end: %s", failure, exc_info=failure)

    async def _stop_core(self, deadline: float) -> None:
        model_loading, self.model_loading = self.model_loading, None
        if model_loading is not None:
            model_loading.close()
        control, self.control = self.control, None
        if control is not None:
            await control.close()
        model_control, self.model_control = self.model_control, None
        if model_control is not None:  # a load under way may use half of what is left, then it is cancelled
            await model_control.close(max(0.0, deadline - asyncio.get_running_loop().time()) / 2)
        core, self.core = self.core, None
        if core is not None:
            await core.stop(timeout_s=max(0.0, deadline - asyncio.get_running_loop().time()))
            core.received.close()  # no new receive segments; the host's arena unlinks what is left
        host, self.host = self.host, None
        if host is not None:
            await host.stop_template()
            host.close()


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _models_at_start(config: ServerConfig, refused: dict[str, tuple[int | None, str]]) -> list[ModelSpec]:
    """The models given, then those of the model repositories when the model control mode is "none" (a repository
    or config that cannot be served is a ModelRepositoryError; with exit on error off, such a model is put in
    `refused` instead)."""
    specs = list(config.models)
    if config.model_control_mode == "none" and config.model_repositories:
        from pytriton.repository import load_repositories

        specs += [ModelSpec(m.config, m.target)
                  for m in load_repositories(config.model_repositories, config.auto_complete_config,
                                             None if config.exit_on_error else refused, config.backend_directory)]
    return specs


def _response_cache(items: list[str]) -> ResponseCache | None:
    """The server's response cache as `--cache-config` sets it (None: no cache)."""
    size = parse_cache_config(items)
    return None if size is None else ResponseCache(size)
