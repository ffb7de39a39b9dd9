"""Launching serve_double.py under one server's venv: ports, readiness, its process tree, a clean stop.

A stop checks that the server left nothing behind (processes, /dev/shm files, files in its own TMPDIR,
NVIDIA PyTriton's workspace); whatever it finds is removed and reported in `Server.problems`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from typing import IO

from bench_lib import procfs
from bench_lib.repo_double import write_repository

REPO = pathlib.Path(__file__).resolve().parents[2]
SERVE_SCRIPT = pathlib.Path(__file__).resolve().parent / "serve_double.py"

# Triton (NVIDIA PyTriton) on a machine without a GPU, harmless: logged at every start / model load.
BENIGN_LOG_LINES = (
    "Failed to set config modification time",
    "CudaDriverHelper has not been initialized",
)
_ERROR_LINE = re.compile(r"Traceback|\bERROR\b|CRITICAL|^E\d{4} ")
GROUP_READY = "pytriton server ready"  # `pytriton serve` logs it once every front-end process is ready


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(server: subprocess.Popen) -> None:
    """SIGINT, a minute to exit, then SIGKILL: a server started by a probe or bench script stops."""
    server.send_signal(signal.SIGINT)
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def wait_model_ready(http_port: int, model: str, timeout_s: float = 120.0) -> None:
    """Wait until GET /v2/models/MODEL/ready answers 200; exit the probe when it does not in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if http_get(f"http://127.0.0.1:{http_port}/v2/models/{model}/ready")[0] == 200:
            return
        time.sleep(0.1)
    raise SystemExit("the server did not become ready")


def http_get(url: str, timeout: float = 1.0) -> tuple[int, bytes]:
    """(status, body); status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except (urllib.error.URLError, OSError, ConnectionError):
        return 0, b""


@dataclasses.dataclass
class ServerSpec:
    name: str  # ours | nvidia | repo (ours, the models from a model repository)
    python: pathlib.Path
    env: dict[str, str]


class Server:
    """One launch of serve_double.py under a given venv."""

    def __init__(self, spec: ServerSpec, batching: str, models: list[str], logfile: pathlib.Path, cwd: pathlib.Path,
                 extra_args: list[str] | None = None):
        self.spec, self.batching, self.models, self.logfile = spec, batching, models, logfile
        self.extra_args = extra_args or []  # more serve_double.py (repo: `pytriton serve`) options
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        while len({self.http_port, self.grpc_port, self.metrics_port}) < 3:
            self.grpc_port, self.metrics_port = free_port(), free_port()
        self.cwd = cwd
        # A TMPDIR of its own: whatever the server leaves in it after stopping is certainly its own.
        self.tmpdir = pathlib.Path(tempfile.mkdtemp(prefix="ptb-"))
        self.workspaces: set[str] = set()  # NVIDIA PyTriton's workspace (under ~/.cache/pytriton), from command lines
        self.proc: subprocess.Popen | None = None
        self.tree: dict[int, int | None] = {}  # pid -> start time
        self.shm_seen: set[str] = set()
        self.startup_s: float | None = None
        self.problems: list[str] = []
        self._log: IO[bytes] | None = None

    def cmd(self) -> list[str]:
        if self.spec.name == "repo":
            repo = write_repository(self.cwd / f"repo-models-{self.batching}", self.models, self.batching)
            return [str(self.spec.python), "-m", "pytriton.cli", "serve", "--model-repository", str(repo),
                    "--http-port", str(self.http_port), "--grpc-port", str(self.grpc_port),
                    "--metrics-port", str(self.metrics_port), *self.extra_args]
        return [str(self.spec.python), str(SERVE_SCRIPT), "--http-port", str(self.http_port),
                "--grpc-port", str(self.grpc_port), "--metrics-port", str(self.metrics_port),
                "--batching", self.batching, "--models", ",".join(self.models), *self.extra_args]

    def start(self, timeout_s: float) -> bool:
        self._log = open(self.logfile, "wb")  # noqa: SIM115 (open for the server's lifetime, closed in stop())
        t0 = time.perf_counter()
        # New session: a Ctrl-C in the terminal reaches only the bench, whose handler stops the server.
        env = dict(self.spec.env, TMPDIR=str(self.tmpdir))
        self.proc = subprocess.Popen(self.cmd(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, cwd=self.cwd, start_new_session=True)
        pending = list(self.models)
        while pending and time.perf_counter() - t0 < timeout_s:
            if self.proc.poll() is not None:
                break
            status, _ = http_get(f"http://127.0.0.1:{self.http_port}/v2/models/{pending[0]}/ready", timeout=0.5)
            if status == 200:
                pending.pop(0)
                continue
            time.sleep(0.02)
        if pending:
            status = self.proc.poll()
            when = f"exited with status {status} after {time.perf_counter() - t0:.0f} s" if status is not None \
                else f"not ready within {timeout_s:.0f} s"
            self.problems.append(f"{self.spec.name}: {when}, {len(pending)} of {len(self.models)} model(s) not "
                                 f"ready; log {self.logfile}")
            return False
        self.startup_s = time.perf_counter() - t0
        self.refresh_tree()
        return True

    def refresh_tree(self) -> list[int]:
        """The server's living processes now; remembers each one (pid, start time) and the shm files it uses."""
        if self.proc is None:
            return []
        pids = procfs.descendants(self.proc.pid)
        for pid in pids:
            if pid not in self.tree:
                self.tree[pid] = procfs.start_time(pid)
                self.workspaces.update(re.findall(r"(/\S*/pytriton/workspace_[^/\s]+)", procfs.cmdline(pid)))
        self.shm_seen |= procfs.shm_files(pids)
        return pids

    def alive_tree(self) -> list[int]:
        """The processes of the tree seen so far that still live (the same pid with the same start time)."""
        return [pid for pid, st in self.tree.items() if st is not None and procfs.start_time(pid) == st]

    def server_version(self) -> str:
        status, body = http_get(f"http://127.0.0.1:{self.http_port}/v2")
        if status == 200:
            try:
                meta = json.loads(body)
                return f"{meta.get('name', '?')} {meta.get('version', '?')}"
            except ValueError:
                pass
        return "?"

    def inference_count(self, model: str) -> int | None:
        status, body = http_get(f"http://127.0.0.1:{self.http_port}/v2/models/{model}/stats", timeout=5)
        if status != 200:
            return None
        try:
            stats = json.loads(body)["model_stats"]
            return sum(int(s.get("inference_count", 0)) for s in stats)
        except (ValueError, KeyError, TypeError):
            return None

    def stop(self, grace_s: float = 45.0) -> None:
        if self.proc is None:
            return
        self.refresh_tree()
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.problems.append(f"{self.spec.name}: still running {grace_s:.0f} s after SIGINT; SIGKILL")
                proc.kill()
                proc.wait()
        if proc.returncode not in (0, -signal.SIGINT):
            self.problems.append(f"{self.spec.name}: server script exited with status {proc.returncode}")
        self._reap_leftovers()
        if self._log is not None:
            self._log.close()

    def _reap_leftovers(self) -> None:
        # Its other processes should follow within a few seconds; kill leftovers by pid (start time checked).
        deadline = time.time() + 10
        while self.alive_tree() and time.time() < deadline:
            time.sleep(0.1)
        for pid in self.alive_tree():
            self.problems.append(f"{self.spec.name}: process {pid} outlived the server; killed")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for f in sorted(f for f in self.shm_seen if os.path.exists(f)):
            self.problems.append(f"{self.spec.name}: {f} left in /dev/shm; removed")
            try:
                os.unlink(f)
            except OSError:
                pass
        left = sorted(str(p.relative_to(self.tmpdir)) for p in self.tmpdir.rglob("*"))
        if left:
            self.problems.append(f"{self.spec.name}: left in its TMPDIR: {', '.join(left[:8])}"
                                 + (f" (+{len(left) - 8} more)" if len(left) > 8 else "") + "; removed")
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        for ws in sorted(self.workspaces):
            if os.path.exists(ws):
                self.problems.append(f"{self.spec.name}: workspace {ws} left behind; removed")
                shutil.rmtree(ws, ignore_errors=True)

    def scan_log(self) -> list[str]:
        """Problems its log shows: the wrong `pytriton` package imported, error lines, tracebacks."""
        try:
            text = self.logfile.read_text(errors="replace")
        except OSError:
            return []
        if self.spec.name == "repo":  # `python -m pytriton.cli`: no model script reports it; ask the same python
            ask = "import os, pytriton; print(os.path.dirname(pytriton.__file__))"
            found = subprocess.run([str(self.spec.python), "-c", ask], capture_output=True, text=True,
                                   cwd=self.cwd, env=self.spec.env, check=False).stdout.strip()
            text = f"BENCH pytriton package: {found}\n" + text
        expected = REPO / "pytriton" if self.spec.name in ("ours", "repo") else self.spec.python.parent.parent
        return log_problems(self.spec.name, text, expected, self.logfile)


def log_problems(name: str, text: str, expected_pkg: pathlib.Path, logfile: pathlib.Path) -> list[str]:
    """What a server log shows: the package it imported must lie under expected_pkg; no error lines."""
    problems = []
    m = re.search(r"^BENCH pytriton package: (.*)$", text, re.MULTILINE)
    if not m:
        problems.append(f"{name}: the model script did not report its pytriton package ({logfile})")
    elif not pathlib.Path(m.group(1)).resolve().is_relative_to(expected_pkg.resolve()):
        problems.append(f"{name}: imported pytriton from {m.group(1)}, expected under {expected_pkg}")
    bad = [line.strip() for line in text.splitlines()
           if not any(benign in line for benign in BENIGN_LOG_LINES) and _ERROR_LINE.search(line)]
    if bad:
        problems.append(f"{name}: {len(bad)} error line(s) in {logfile}: {bad[0][:300]}")
    return problems


def group_ready(server: Server, processes: int, timeout_s: float) -> str | None:
    """Wait for the CLI's "ready" line of `pytriton serve --frontend-processes N` (every front-end process ready: the
    first ready one answers the models' readiness sooner), then check that the tree whose CPU is counted holds all N
    front-end processes. None when so, else what is wrong, in words."""
    line = GROUP_READY if processes == 1 else f"{GROUP_READY} ({processes} front-end processes)"
    deadline = time.monotonic() + timeout_s
    while line not in server.logfile.read_text(errors="replace"):
        if time.monotonic() > deadline or server.proc is None or server.proc.poll() is not None:
            return f"no {line!r} in {server.logfile} within {timeout_s:.0f} s"
        time.sleep(0.1)
    pids = server.refresh_tree()
    frontends = len([p for p in pids if "-m pytriton.server " in procfs.cmdline(p)]) if processes > 1 else 1
    if frontends != processes:
        return (f"{frontends} front-end processes in the server's process tree, expected {processes}: its CPU per "
                "request would leave some out")
    return None
