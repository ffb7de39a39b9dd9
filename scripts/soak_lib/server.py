"""The server under soak: `pytriton serve` of y = 2x (examples/add_sub.py:double), its memory, its pending-request
gauge, a stop that must finish, and what it leaves behind."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from typing import IO

from bench_lib import procfs

REPO = pathlib.Path(__file__).resolve().parents[2]
PORT_RE = re.compile(r"Started (GRPCInferenceService|HTTPService|Metrics Service) at [^:]+:(\d+)")
# an instance's default name is <model>_<group index>_<count> (Triton's `<group>_<c>`, the group named `<model>_<i>`)
INSTANCE_STARTED_RE = re.compile(r"model instance '(.+)_\d+_\d+' started \(pid (\d+)\)")
PENDING_RE = re.compile(r"^nv_inference_pending_request_count(?:\{[^}]*\})?\s+(\S+)", re.MULTILINE)
OUR_SHM_RE = re.compile(r"^pytriton_[0-9a-f]+_(\d+)_")  # the server's segments carry their owner's pid


def parse_pending(metrics_text: str) -> int | None:
    """The sum of nv_inference_pending_request_count over the models; None when the gauge is missing."""
    values = PENDING_RE.findall(metrics_text)
    return int(sum(float(v) for v in values)) if values else None


def server_segments(entries: list[str], pids: set[int]) -> list[str]:
    """The /dev/shm entries that belong to one of the server's processes (by the owner pid in the name)."""
    return sorted(e for e in entries if (m := OUR_SHM_RE.match(e)) and int(m.group(1)) in pids)


@dataclasses.dataclass
class RssReading:
    t_s: float  # seconds since the load started (negative: before)
    server_kib: int
    workers_kib: int
    workers: int

    @property
    def total_kib(self) -> int:
        return self.server_kib + self.workers_kib


@dataclasses.dataclass(frozen=True)
class ServerProcess:
    """One process of the server's tree: the CLI's (`server`), a front-end process of a group (`frontend`) or a
    model instance's worker (`worker`, with its model)."""

    pid: int
    start: int | None  # start time: with the pid, names the process for good
    role: str
    model: str = ""


def describe(pid: int) -> ServerProcess:
    """What a process of the server's tree is, from its command line."""
    argv = procfs.cmdline(pid).split(" ", 4)
    role, model = "other", ""
    if len(argv) >= 3 and argv[1:3] == ["-m", "pytriton.backends.worker"]:
        role = "worker"
        m = re.search(r'"identity": "([^"#]+)#', procfs.cmdline(pid))
        model = m.group(1) if m else "?"
    elif len(argv) >= 3 and argv[1:3] == ["-m", "pytriton.server"]:
        role = "frontend"
    elif "pytriton.cli" in argv:
        role = "server"
    return ServerProcess(pid, procfs.start_time(pid), role, model)


def fd_count(pid: int) -> int | None:
    """Open file descriptors of a process (None once it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class SoakServer:
    """`pytriton serve` on free loopback ports, with its own TMPDIR; stdout goes to `logfile`."""

    def __init__(self, python: pathlib.Path, logfile: pathlib.Path, instances: int, dynamic_batching: bool,
                 exit_timeout_s: float, model_args: list[str] | None = None) -> None:
        """model_args: what `pytriton serve` serves, in place of examples.add_sub:double with `instances` and
        `dynamic_batching` (e.g. --model-repository DIR ...)."""
        self.logfile, self.exit_timeout_s = logfile, exit_timeout_s
        self.tmpdir = pathlib.Path(tempfile.mkdtemp(prefix="soak-server-"))
        if model_args is None:
            model_args = ["examples.add_sub:double", "--input", "INPUT:fp32:-1", "--output", "OUTPUT:fp32:-1",
                          "--max-batch-size", "64", "--instances", str(instances)]
            if dynamic_batching:
                model_args.append("--dynamic-batching")
        self.cmd = [str(python), "-m", "pytriton.cli", "serve", *model_args, "--exit-timeout", str(exit_timeout_s)]
        for service in ("grpc", "http", "metrics"):
            self.cmd += [f"--{service}-port", "0", f"--{service}-address", "127.0.0.1"]
        self.ports: dict[str, int] = {}
        self.pids_seen: dict[int, int | None] = {}  # pid -> start time: names one process for good
        self._pids_lock = threading.Lock()  # (the chaos soak's fault thread reads the tree too)
        self.proc: subprocess.Popen[str] | None = None
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None
        self._log: IO[str] | None = None
        self.instance_models: dict[int, str] = {}  # worker pid -> its model, from the log's 'started (pid N)' lines
        self.grpc_url = self.http_url = self.metrics_url = ""  # known once it is ready

    def start(self, timeout_s: float) -> None:
        """Start it and wait for 'pytriton server ready'. Raises RuntimeError (with the log's end) otherwise."""
        env = dict(os.environ, TMPDIR=str(self.tmpdir), PYTRITON_EXIT_WITH_PARENT="1")
        env.pop("PYTHONPATH", None)
        self._log = open(self.logfile, "w")  # noqa: SIM115 (closed by stop())
        self.proc = subprocess.Popen(self.cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        self._seen([self.proc.pid])
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout_s) or len(self.ports) < 3 or self.proc.poll() is not None:
            self.stop()
            tail = "".join(self.logfile.read_text(errors="replace").splitlines(keepends=True)[-20:])
            raise RuntimeError(f"pytriton serve did not become ready within {timeout_s:.0f} s; log:\n{tail}")
        self.grpc_url = f"127.0.0.1:{self.ports['GRPCInferenceService']}"
        self.http_url = f"127.0.0.1:{self.ports['HTTPService']}"
        self.metrics_url = f"http://127.0.0.1:{self.ports['Metrics Service']}/metrics"

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None and self._log is not None
        for line in self.proc.stdout:
            self._log.write(line)
            self._log.flush()
            m = PORT_RE.search(line)
            if m:
                self.ports[m.group(1)] = int(m.group(2))
            m = INSTANCE_STARTED_RE.search(line)
            if m:  # (a worker forked from the worker template shows no spec on its command line)
                self.instance_models[int(m.group(2))] = m.group(1)
            if "pytriton server ready" in line:
                self._ready.set()
        self._ready.set()

    def rss(self, t_s: float) -> RssReading | None:
        """Resident memory of the server process and of its workers now; None once it is gone."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        pids = procfs.descendants(self.proc.pid)
        self._seen(pids)
        workers = [p for p in pids if p != self.proc.pid]
        return RssReading(t_s=round(t_s, 1), server_kib=procfs.rss_kib(self.proc.pid),
                          workers_kib=sum(procfs.rss_kib(p) for p in workers), workers=len(workers))

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def tree(self) -> list[ServerProcess]:
        """The server's living processes now (remembered for the leftovers check)."""
        if self.proc is None:
            return []
        pids = procfs.descendants(self.proc.pid)
        self._seen(pids)
        found = [p for p in map(describe, pids) if p.start is not None]
        return [dataclasses.replace(p, model=self.instance_models.get(p.pid, "?")) if p.model == "?" else p
                for p in found]

    def is_alive(self, process: ServerProcess) -> bool:
        return process.start is not None and procfs.start_time(process.pid) == process.start

    def dead_owner_segments(self) -> list[str]:
        """/dev/shm segments of the server's processes that are gone (the server must remove them): after a worker
        was killed, its segments; while the server runs."""
        dead = {p for p, st in self._pids() if st is None or procfs.start_time(p) != st}
        return server_segments(os.listdir("/dev/shm"), dead)

    def _seen(self, pids: list[int]) -> None:
        started = {pid: procfs.start_time(pid) for pid in pids}
        with self._pids_lock:
            for pid, st in started.items():
                self.pids_seen.setdefault(pid, st)

    def _pids(self) -> list[tuple[int, int | None]]:
        with self._pids_lock:
            return list(self.pids_seen.items())

    def _alive(self) -> list[int]:
        return sorted(p for p, st in self._pids() if st is not None and procfs.start_time(p) == st)

    def pending(self) -> int | None:
        """nv_inference_pending_request_count now (None: no answer from the metrics port)."""
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=5) as r:
                return parse_pending(r.read().decode(errors="replace"))
        except OSError:
            return None

    def stop(self) -> tuple[int | None, float]:
        """SIGINT, then SIGKILL past the exit timeout + 10 s: (exit status, seconds the stop took)."""
        if self.proc is None:
            return None, 0.0
        proc, self.proc = self.proc, None
        t0 = time.monotonic()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(self.exit_timeout_s + 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        took = time.monotonic() - t0
        if self._reader is not None:
            self._reader.join(5)
        if self._log is not None:
            self._log.close()
        return proc.returncode, took

    def leftovers(self, grace_s: float = 10.0) -> list[str]:
        """After stop: living processes of its tree, its /dev/shm segments, files in its TMPDIR (all removed)."""
        deadline = time.monotonic() + grace_s
        alive = self._alive()
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = self._alive()
        found = [f"process {p} still running {grace_s:.0f} s after the stop; killed" for p in alive]
        for p in alive:  # the server's own processes: same pid and start time as when we saw them
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        for entry in server_segments(os.listdir("/dev/shm"), {p for p, _ in self._pids()}):
            found.append(f"/dev/shm/{entry}")
            try:
                os.unlink(f"/dev/shm/{entry}")
            except OSError:
                pass
        found += [f"{p} (in its TMPDIR)" for p in sorted(self.tmpdir.rglob("*"))]
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        return found

    def log_problems(self) -> tuple[int, list[str]]:
        """(tracebacks, the first error lines) in the server's log."""
        try:
            text = self.logfile.read_text(errors="replace")
        except OSError:
            return 0, []
        errors = [ln.strip() for ln in text.splitlines() if re.search(r"\bERROR\b|CRITICAL|Traceback", ln)]
        return text.count("Traceback (most recent call last)"), errors[:10]
