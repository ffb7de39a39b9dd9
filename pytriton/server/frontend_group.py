"""`pytriton serve --frontend-processes N` with N > 1: N server processes behind the same gRPC and HTTP ports.

This process (the CLI's) reserves the ports (bound with SO_REUSEPORT, never listening, so that port 0 is resolved
once and the ports stay ours), starts N `python -m pytriton.server` processes that listen on them with SO_REUSEPORT (the kernel
spreads connections over them), each with its own scheduler and its own worker processes, waits for all to be
ready, and stops them all on SIGINT/SIGTERM or when one of them exits. The design and its limits:
docs/multi-frontend.md.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import secrets
import signal
import socket
import threading
import time
from typing import Any

from pytriton.config.metrics import MetricsSettings
from pytriton.config.server import ServerConfig
from pytriton.exceptions import PyTritonRuntimeError
from pytriton.proxy.arena import sweep_dead_segments
from pytriton.server.launcher import START_TIMEOUT_S, ServerLauncher
from pytriton.server.peers import TOKEN_ENV
from pytriton.supervisor.run_dir import sweep_stale_run_dirs

logger = logging.getLogger("pytriton.server")

OPTION = "--frontend-processes"


def refusal(config: ServerConfig, processes: int) -> str | None:
    """Why `config` cannot be served correctly by `processes` front-end processes yet (None: it can)."""
    if processes <= 1:
        return None
    if config.model_control_mode != "none":
        return (f"--model-control-mode {config.model_control_mode}: each front-end process would load and unload "
                "models on its own; use --model-control-mode none")
    for spec in config.models:
        if spec.config.sequence_batcher is not None:
            return (f"model '{spec.config.model_name}' uses sequence batching: a sequence must stay on one instance "
                    "but its requests may reach different front-end processes")
    if MetricsSettings.parse(config.metrics_config).summary_latencies:
        return "--metrics-config summary_latencies=true: the quantiles of several processes cannot be added up"
    if config.trace_config or config.trace_file:
        return "--trace-config: every front-end process would trace on its own into the same place"
    if config.allow_sagemaker or config.allow_vertex_ai:
        return "the SageMaker and Vertex AI endpoints are served by one process only"
    if config.openai_port is not None:
        return "--openai-port: the OpenAI port is served by one process only"
    return None


def _reserve(address: str, port: int, protocol: str) -> socket.socket:
    """A socket bound to `address:port` with SO_REUSEPORT, not listening: connections go only to the listeners that
    the front-end processes open on the same port."""
    host = address.strip("[]") or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for reuse_port in ((False, True) if port else (True,)):
        # A given port is first bound without SO_REUSEPORT: the kernel lets every socket of this user that sets it
        # share a port, so a server (another group) already listening there would otherwise get half of the
        # connections silently. Port 0 is a fresh port: no one else's.
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise OSError(f"cannot listen for {protocol} on {address}:{port}: {exc}") from exc
        if not reuse_port:
            sock.close()
    return sock


class FrontendGroup:
    """N front-end processes and the ports they share; `run()` serves until a signal or a process's exit."""

    def __init__(self, config: ServerConfig, processes: int):
        self.config = config
        self.processes = processes
        self.children: list[ServerLauncher] = []
        self._reserved: list[socket.socket] = []
        self._stop = threading.Event()
        self._signals = 0
        self._started: list[ServerLauncher] = []  # (a second signal is passed on to them while they stop)

    def _port(self, allowed: bool, address: str, port: int, protocol: str) -> int:
        if not allowed:
            return port
        sock = _reserve(address, port, protocol)
        self._reserved.append(sock)
        return int(sock.getsockname()[1])

    def child_configs(self) -> list[ServerConfig]:
        """Reserve the shared ports and each process's private one; the config of each process."""
        c = self.config
        grpc_port = self._port(c.allow_grpc, c.grpc_address, c.grpc_port, "gRPC")
        http_port = self._port(c.allow_http, c.http_address, c.http_port, "HTTP")
        peers = [self._port(True, "127.0.0.1", 0, "front-end peers") for _ in range(self.processes)]
        return [dataclasses.replace(c, grpc_port=grpc_port, http_port=http_port, frontend_index=index,
                                    frontend_peer_ports=peers, exit_with_parent=True,
                                    allow_metrics=c.allow_metrics and index == 0)  # one metrics port: process 0's
                for index in range(self.processes)]

    def _on_signal(self, signum: int, frame: Any) -> None:
        """The first signal stops the group; a second one is passed on (each process then stops waiting for the
        requests in flight, as a server given two signals does)."""
        self._signals += 1
        self._stop.set()
        if self._signals == 2:
            logger.warning("second signal: the front-end processes stop without waiting for in-flight requests")
            for child in self._started:
                if child.popen is not None:
                    child.popen.send_signal(signal.SIGINT)

    def run(self) -> None:
        handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._start()
            if self._stop.is_set():
                return
            logger.info("pytriton server ready (%d front-end processes)", self.processes)
            while not self._stop.wait(0.2):  # (a signal sets it; a process's exit is seen at the next check)
                for index, child in enumerate(self.children):
                    if not child.alive():
                        raise PyTritonRuntimeError(
                            f"front-end process {index} (pid {child.pid}) exited with code {child.returncode}; "
                            "stopping the others")
            logger.info("signal received; stopping %d front-end processes", self.processes)
        finally:
            self.stop()
            for signum, handler in handlers.items():
                signal.signal(signum, handler)

    def _start(self) -> None:
        os.environ[TOKEN_ENV] = secrets.token_hex(16)  # (the processes' environment; never on a command line)
        configs = self.child_configs()
        for index, child_config in enumerate(configs):
            child = ServerLauncher(child_config, pathlib.Path.cwd(), new_session=True)
            self.children.append(child)
            self._started.append(child)
            logger.info("front-end process %d started (pid %d)", index, child.pid)
        # Wait for all at once, a signal heard at each step (a slow model load must not hold off SIGINT, as it does
        # not with one process), a process that fails to start reported when it does, whichever it is.
        deadline = time.monotonic() + START_TIMEOUT_S
        pending = dict(enumerate(self.children))
        while pending and not self._stop.is_set():
            late = time.monotonic() > deadline
            for index, child in list(pending.items()):
                if child.ready_or_ended() or late:
                    try:
                        child.wait_ready(0)
                    except PyTritonRuntimeError as exc:
                        raise PyTritonRuntimeError(f"front-end process {index}: {exc}") from None
                    del pending[index]
            self._stop.wait(0.05)

    def stop(self) -> None:
        """Stop every process at once (each drains within the exit timeout, then is killed), release the ports,
        and remove what a process that died left behind (its shared memory, its run directory)."""
        stops = [threading.Thread(target=child.terminate, name=f"stop-frontend-{i}")
                 for i, child in enumerate(self.children)]
        for thread in stops:
            thread.start()
        for thread in stops:
            thread.join()
        self.children = []
        for sock in self._reserved:
            sock.close()
        self._reserved = []
        os.environ.pop(TOKEN_ENV, None)
        sweep_dead_segments()
        sweep_stale_run_dirs()
        logger.info("pytriton server stopped")


def run_group(config: ServerConfig, processes: int) -> None:
    """Blocking entry point used by the CLI for `--frontend-processes N` (N > 1)."""
    FrontendGroup(config, processes).run()
