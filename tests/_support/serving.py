"""Start real `pytriton serve` processes on ports 0 of 127.0.0.1 and read their logs."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

from tests._support.logs import PID_RE, PORT_RE, READY_LINE, TEMPLATE_RE
from tests._support.paths import REPO
from tests._support.ports import LOCAL_PORTS
from tests._support.processes import started_pids
from tests._support.waits import holds_within


class ServerProcess:
    """A `pytriton serve` process with its log; `grpc_url` once it is ready."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, timeout_s: float = 60.0,
                 cwd: Path | None = None, program: list[str] | None = None):
        """`program` (default `python -m pytriton.cli serve`) runs with `args`, then ports 0 on 127.0.0.1."""
        cmd = [*(program or [sys.executable, "-m", "pytriton.cli", "serve"]), *args, *LOCAL_PORTS]
        full_env = dict(os.environ, PYTRITON_EXIT_WITH_PARENT="1")  # no server outlives a crashed test run
        full_env.update(env or {})
        self.process = subprocess.Popen(
            cmd, cwd=cwd or REPO, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        started_pids.add(self.process.pid)
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.ports: dict[str, int] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout_s) or not self.ports:
            self.stop()
            raise RuntimeError(f"server did not become ready; log:\n{self.log}")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            match = PORT_RE.search(line)
            if match:
                self.ports[match.group(1)] = int(match.group(2))
            for pid in PID_RE.findall(line) + TEMPLATE_RE.findall(line):
                started_pids.add(int(pid))
            if READY_LINE in line:
                self._ready.set()
        self._ready.set()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    @property
    def port(self) -> int:
        return self.ports["GRPCInferenceService"]

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.ports['GRPCInferenceService']}"

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.ports['HTTPService']}"

    @property
    def openai_url(self) -> str:
        """The OpenAI port's base URL (`--openai-port 0`), as the openai client takes it."""
        return f"http://127.0.0.1:{self.ports['OpenAIService']}/v1"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['Metrics Service']}/metrics"

    def worker_pids(self) -> list[int]:
        return [int(p) for p in PID_RE.findall(self.log)]

    def template_pids(self) -> list[int]:
        """The worker templates the server started, in order (the last is the one that forks now)."""
        return [int(p) for p in TEMPLATE_RE.findall(self.log)]

    def wait_for_log(self, text: str, timeout_s: float = 20.0) -> bool:
        """Whether `text` appears in the log within `timeout_s`."""
        return holds_within(lambda: text in self.log, timeout_s)

    def stop(self, sig: int = signal.SIGINT, timeout_s: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)
        if not self._reader.is_alive() and self.process.stdout is not None:
            self.process.stdout.close()  # (a failed test's traceback may keep this object alive until exit)
        return self.process.returncode


@contextlib.contextmanager
def serve(target: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
          ) -> Iterator[ServerProcess]:
    """A ready server for the `with` block; it must exit 0 on SIGINT at the end."""
    server = ServerProcess([target, *args], env=env, cwd=cwd)
    try:
        yield server
    finally:
        code = server.stop()
        assert code == 0, f"server exited with {code}; log:\n{server.log}"


def lazy_servers(specs: dict[str, tuple[str, list[str]]]) -> Iterator[dict[str, ServerProcess]]:
    """For a module-scoped fixture: servers by name (target, args), each started when a test first asks."""
    with contextlib.ExitStack() as stack:

        class Lazy(dict):
            def __missing__(self, name: str) -> ServerProcess:
                target, args = specs[name]
                server = self[name] = stack.enter_context(serve(target, *args))
                return server

        yield Lazy()


def tensor_args(kind: str, specs: list[tuple[str, str, str]]) -> list[str]:
    """`--input NAME:DTYPE:SHAPE` (kind "input" or "output") for each (name, dtype, shape)."""
    args = []
    for name, dtype, shape in specs:
        args += [f"--{kind}", f"{name}:{dtype}:{shape}"]
    return args


def serve_on_a_taken_port(*args: str) -> tuple[subprocess.CompletedProcess, int]:
    """Run `python -m pytriton.cli serve ARGS` to its end, each "{port}" in ARGS replaced by a port that another
    socket listens on; return the finished process and that port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "pytriton.cli", "serve", *(a.replace("{port}", str(port)) for a in args)]
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False), port
