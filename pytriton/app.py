"""The server process: composes the core, the worker supervisor and the front-ends, and runs them.

`Server` is the programmatic API (async start/stop); `run()` runs one until SIGINT/SIGTERM and stops it
gracefully: new requests are refused, in-flight ones finish (bounded by `exit_timeout_s`), workers exit,
and the run directory, sockets and shared-memory segments are removed.
"""

from __future__ import annotations

import asyncio
import gc
import dataclasses
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
from typing import Callable

from pytriton.core.access import GRPC_HEADER_PREFIX, AccessPolicy
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.frontend.grpc import H2Limits
from pytriton.frontend.grpc.server import GrpcFrontend
from pytriton.frontend.http.app import HttpApp
from pytriton.frontend.http.server import HttpFrontend
from pytriton.frontend.metrics.server import MetricsApp
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.arena import sweep_dead_segments, unlink_segments
from pytriton.proxy.router import DEFAULT_INLINE_MAX

logger = logging.getLogger("pytriton.server")


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
    http_max_input_bytes: int = 64 * 1024 * 1024
    allow_metrics: bool = True
    metrics_address: str = "0.0.0.0"
    metrics_port: int = 8002
    trace_file: str = ""
    allow_client_shm: bool = True
    shm_local_only: bool = True
    http_restricted_api: list[str] = dataclasses.field(default_factory=list)
    grpc_restricted_protocol: list[str] = dataclasses.field(default_factory=list)
    log_level: str = "INFO"
    exit_timeout_s: float = 30.0
    exit_with_parent: bool = os.environ.get("PYTRITON_EXIT_WITH_PARENT", "") == "1"
    inline_max_bytes: int = int(os.environ.get("PYTRITON_INLINE_MAX_BYTES", DEFAULT_INLINE_MAX))


def gpu_available() -> bool:
    """A GPU device node exists and cupy (extra "gpu") is installed: CUDA shared memory can work."""
    import glob
    import importlib.util

    return bool(glob.glob("/dev/nvidia[0-9]*")) and importlib.util.find_spec("cupy") is not None


class Server:
    """One pytriton server in this process's event loop."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.tag = secrets.token_hex(4)
        self.run_dir: str | None = None
        self.core: ServerCore | None = None
        self.grpc: GrpcFrontend | None = None
        self.http: HttpFrontend | None = None
        self.metrics: HttpFrontend | None = None
        self.log_settings = LogSettings(config.log_level)
        self.trace_settings = TraceSettings(config.trace_file)

    @property
    def grpc_port(self) -> int | None:
        return self.grpc.port if self.grpc else None

    @property
    def http_port(self) -> int | None:
        return self.http.port if self.http else None

    @property
    def metrics_port(self) -> int | None:
        return self.metrics.port if self.metrics else None

    async def start(self) -> None:
        """Start workers and front-ends; on any failure everything started so far is stopped again."""
        sweep_dead_segments()
        self.run_dir = tempfile.mkdtemp(prefix=f"pytriton-{self.tag}-")
        try:
            self.core = ServerCore(
                self.run_dir,
                self.tag,
                self.config.inline_max_bytes,
                self.config.log_level,
                allow_client_shm=self.config.allow_client_shm,
                gpu_available=gpu_available(),
            )
            await self.core.start()
            for spec in self.config.models:
                await self.core.add_model(spec.config, spec.callable_target)
            config = self.config
            if config.allow_grpc:
                self.grpc = GrpcFrontend(
                    self.core,
                    config.grpc_address,
                    config.grpc_port,
                    self.log_settings,
                    self.trace_settings,
                    header_forward_pattern=config.grpc_header_forward_pattern,
                    access=AccessPolicy.from_specs(
                        config.grpc_restricted_protocol, config.shm_local_only, GRPC_HEADER_PREFIX
                    ),
                    limits=config.grpc_limits,
                )
                await self.grpc.start()
                await self.grpc.set_serving(True)
            if config.allow_http:
                app = HttpApp(
                    self.core,
                    self.log_settings,
                    self.trace_settings,
                    header_forward_pattern=config.http_header_forward_pattern,
                    max_input_bytes=config.http_max_input_bytes,
                    access=AccessPolicy.from_specs(config.http_restricted_api, config.shm_local_only),
                )
                self.http = HttpFrontend(app, config.http_address, config.http_port, "HTTPService")
                await self.http.start()
            if config.allow_metrics:
                self.metrics = HttpFrontend(MetricsApp(self.core), config.metrics_address, config.metrics_port,
                                            "Metrics Service")
                await self.metrics.start()
        except BaseException:
            await self.stop(drain_timeout_s=0)
            raise
        logger.info("pytriton server ready")

    async def stop(self, drain_timeout_s: float | None = None) -> None:
        """Drain in-flight requests, stop front-ends and workers, remove every resource of ours."""
        timeout = self.config.exit_timeout_s if drain_timeout_s is None else drain_timeout_s
        if self.core is not None:
            if self.grpc is not None:
                await self.grpc.set_serving(False)
            await self.core.drain(timeout)
        if self.grpc is not None:
            await self.grpc.stop(grace_s=1.0)
            self.grpc = None
        for frontend in (self.http, self.metrics):
            if frontend is not None:
                await frontend.stop()
        self.http = self.metrics = None
        if self.core is not None:
            await self.core.stop(timeout_s=max(5.0, min(timeout, 30.0)))
            self.core = None
        unlink_segments(self.tag)
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir = None
        logger.info("pytriton server stopped")


async def _watch_parent(stop: Callable[[], None], period_s: float = 0.5) -> None:
    """Stop the server when the process that started it is gone (it was re-parented)."""
    parent = os.getppid()
    while True:
        await asyncio.sleep(period_s)
        if os.getppid() != parent:
            logger.warning("the parent process (pid %d) is gone; stopping", parent)
            stop()
            return


async def serve_until_signal(config: ServerConfig, on_ready: Callable[[Server], None] | None = None) -> None:
    """Run a server until SIGINT or SIGTERM, then stop it gracefully; a second signal skips the drain."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    server = Server(config)

    def on_signal() -> None:
        if stop.is_set():
            logger.warning("second signal: not waiting for in-flight requests any longer")
            if server.core is not None:
                server.core.cancel_drain()
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    watchdog = asyncio.ensure_future(_watch_parent(on_signal)) if config.exit_with_parent else None
    try:
        start = asyncio.ensure_future(server.start())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({start, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not start.done():
            logger.info("signal received while starting; stopping")
            start.cancel()
            await asyncio.gather(start, return_exceptions=True)
            return
        start.result()
        if on_ready is not None:
            on_ready(server)
        await stopped
        logger.info("signal received; stopping (waiting up to %.0f s for in-flight requests)", config.exit_timeout_s)
        await server.stop()
    finally:
        if watchdog is not None:
            watchdog.cancel()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def _freeze_heap(server: Server) -> None:
    """A process of its own: move what start-up allocated out of the collector's sight (gc.freeze), so later
    collections scan only what requests allocate."""
    gc.collect()
    gc.freeze()


def run(config: ServerConfig) -> None:
    """Blocking entry point used by the CLI."""
    asyncio.run(serve_until_signal(config, on_ready=_freeze_heap))


READY_PREFIX = "PYTRITON_READY "


def _announce(server: Server) -> None:
    """One line on stdout that a parent process (pytriton.triton.Triton) waits for."""
    assert server.core is not None and server.core.router is not None
    info = {
        "grpc_port": server.grpc_port,
        "http_port": server.http_port,
        "metrics_port": server.metrics_port,
        "address": server.core.router.address,
        "tag": server.tag,
        "pid": os.getpid(),
        "inline_max": server.core.inline_max,
    }
    sys.stdout.write(READY_PREFIX + json.dumps(info) + "\n")
    sys.stdout.flush()
    _freeze_heap(server)


def main(argv: list[str] | None = None) -> int:
    """`python -m pytriton.app '<ServerConfig as JSON>'`: the server process that `Triton.run()` starts."""
    args = sys.argv[1:] if argv is None else argv
    fields = json.loads(args[0])
    models = [ModelSpec(TritonModelConfig.from_dict(m["config"]), m["callable"]) for m in fields.pop("models", [])]
    if isinstance(fields.get("grpc_limits"), dict):
        fields["grpc_limits"] = H2Limits(**fields["grpc_limits"])
    config = ServerConfig(models=models, **fields)
    logging.basicConfig(level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    try:
        asyncio.run(serve_until_signal(config, on_ready=_announce))
    except (OSError, RuntimeError) as exc:
        sys.stderr.write(f"pytriton server failed to start: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
