"""Fixtures that start real `pytriton serve` processes and check that nothing of ours is left behind."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterable, Iterator

import pytest

REPO = Path(__file__).resolve().parent.parent
PORT_RE = re.compile(r"Started (GRPCInferenceService|HTTPService|Metrics Service) at [^:]+:(\d+)")
PID_RE = re.compile(r"started \(pid (\d+)\)")


def _process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot), None when there is no such process: gone, a zombie (gone
    for our purposes), or `pid` the id of a thread (/proc shows threads too, and kill() on a thread's id signals its
    whole process). A pid and its start time name one process: a pid is reused, not within the same tick."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # (from the 3rd field on: the name may hold anything)
        with open(f"/proc/{pid}/status") as f:
            tgid = next(int(line.split()[1]) for line in f if line.startswith("Tgid:"))
    except (FileNotFoundError, ProcessLookupError, StopIteration):  # (gone between the looks: ESRCH)
        return None
    if fields[0] == "Z" or tgid != pid:
        return None
    return int(fields[19])  # the 22nd field: starttime


def _pid_alive(pid: int) -> bool:
    return _process_start(pid) is not None


class StartedProcesses:
    """The processes the tests started (servers, their workers, user programs): by pid (their shared-memory segments
    are named after it) and by pid and start time, what the session's end waits for and kills — once a process is
    gone its pid goes to the next process or thread anyone starts, which is not ours to wait for or kill."""

    def __init__(self) -> None:
        self._pids: set[int] = set()
        self._known: set[tuple[int, int]] = set()

    def add(self, pid: int) -> None:
        self._pids.add(pid)
        start = _process_start(pid)
        if start is not None:  # (gone already, or not a process: nothing to wait for)
            self._known.add((pid, start))

    def update(self, pids: Iterable[int]) -> None:
        for pid in pids:
            self.add(pid)

    def __contains__(self, pid: object) -> bool:
        return pid in self._pids

    def __iter__(self) -> Iterator[int]:
        return iter(set(self._pids))

    def alive(self) -> list[int]:
        """Those still running (as the same processes)."""
        return sorted(pid for pid, start in self._known if _process_start(pid) == start)

    def kill_alive(self) -> None:
        """SIGKILL those still running: through a pidfd, which names the process it was opened for whatever happens
        to its pid after, once it is checked to be the same process."""
        for pid, start in list(self._known):
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:  # gone
                continue
            try:
                if _process_start(pid) == start:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(pidfd)


_started_pids = StartedProcesses()


def shm_segments_of(pids: set[int]) -> list[str]:
    """Our shared-memory segments (pytriton_<tag>_<pid>_...) owned by one of `pids`."""
    found = []
    for entry in os.listdir("/dev/shm"):
        match = re.match(r"^pytriton_[0-9a-f]+_(\d+)_", entry)
        if match and int(match.group(1)) in pids:
            found.append(entry)
    return found


class ServerProcess:
    """A `pytriton serve` process with its log; `grpc_url` once it is ready."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, timeout_s: float = 60.0,
                 cwd: Path | None = None, program: list[str] | None = None):
        """`program` (default `python -m pytriton.cli serve`) runs with `args`, then ports 0 on 127.0.0.1."""
        cmd = [*(program or [sys.executable, "-m", "pytriton.cli", "serve"]), *args]
        for service in ("grpc", "http", "metrics"):
            cmd += [f"--{service}-port", "0", f"--{service}-address", "127.0.0.1"]
        full_env = dict(os.environ, PYTRITON_EXIT_WITH_PARENT="1")  # no server outlives a crashed test run
        full_env.update(env or {})
        self.process = subprocess.Popen(
            cmd, cwd=cwd or REPO, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        _started_pids.add(self.process.pid)
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
            for pid in PID_RE.findall(line):
                _started_pids.add(int(pid))
            if "pytriton server ready" in line:
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
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['Metrics Service']}/metrics"

    def worker_pids(self) -> list[int]:
        return [int(p) for p in PID_RE.findall(self.log)]

    def wait_for_log(self, text: str, timeout_s: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if text in self.log:
                return True
            time.sleep(0.05)
        return False

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
    args = []
    for name, dtype, shape in specs:
        args += [f"--{kind}", f"{name}:{dtype}:{shape}"]
    return args


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind() -> Iterator[None]:
    """After the session: no process we started is alive and /dev/shm has no segment they owned."""
    yield
    deadline = time.monotonic() + 10
    alive = _started_pids.alive()
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = _started_pids.alive()
    leftovers = shm_segments_of(set(_started_pids))
    if alive:  # report, but do not leave them running
        _started_pids.kill_alive()
    assert not alive, f"processes still alive after the tests: {alive}"
    assert not leftovers, f"shared-memory segments left in /dev/shm: {leftovers}"


def serve_on_a_taken_port(*args: str) -> tuple[subprocess.CompletedProcess, int]:
    """Run `python -m pytriton.cli serve ARGS` to its end, each "{port}" in ARGS replaced by a port that another
    socket listens on; return the finished process and that port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "pytriton.cli", "serve", *(a.replace("{port}", str(port)) for a in args)]
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False), port
