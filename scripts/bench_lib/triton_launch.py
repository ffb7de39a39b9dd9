"""The two servers of the suites that compare with the real tritonserver (vs_triton.py, many_models.py), on one
generated model repository: ours (`pytriton serve --model-repository R`) and tritonserver 2.51 from the
nvidia-pytriton wheel (real_triton.py). Both are bench `Server`s: readiness of every model, the process tree, a
stop that reports and removes whatever is left (processes, /dev/shm segments, TMPDIR files).
"""

from __future__ import annotations

import os
import pathlib
import threading

from bench_lib import procfs
from bench_lib.real_triton import RealTriton, stub_regions
from bench_lib.scheduling import CmdServer
from bench_lib.servers import BENIGN_LOG_LINES, Server, ServerSpec

SERVERS = ("ours", "triton")
LABEL = {"ours": "pytriton (ours)", "triton": "tritonserver 2.51"}
# Each server's processes, by role: (role of the root / a front-end process, role of the model processes)
ROLES = {"ours": ("front-end", "workers"), "triton": ("tritonserver", "Python stubs")}
# Ours on N front-end processes (`pytriton serve --frontend-processes N`, vs_triton.py's --ours-frontends): "ours-feN"
FRONTENDS_PREFIX = "ours-fe"
# Triton's lines at every start on a machine without a GPU or with a read-only repository: not a problem
TRITON_BENIGN = (*BENIGN_LOG_LINES, "Unable to allocate pinned system memory", "pinned memory pool",
                 "Failed to initialize CUDA", "Unable to get number of CUDA devices")


def frontends_name(processes: int) -> str:
    """The suite's name of ours on `processes` front-end processes."""
    return f"{FRONTENDS_PREFIX}{processes}"


def frontends(name: str) -> int:
    """How many front-end processes the named server of ours runs (1: plain `ours`; 0: not ours)."""
    if name.startswith(FRONTENDS_PREFIX) and name[len(FRONTENDS_PREFIX):].isdigit():
        return int(name[len(FRONTENDS_PREFIX):])
    return 1 if name == "ours" else 0


def kind(name: str) -> str:
    """"ours" or "triton": which server a suite's server name runs."""
    return "ours" if frontends(name) else name


def label(name: str) -> str:
    """The report's name of a server."""
    n = frontends(name)
    return f"pytriton (ours, {n} front-end processes)" if kind(name) == "ours" and name != "ours" else LABEL[name]


def roles(name: str) -> tuple[str, str]:
    return ROLES[kind(name)]


def role(name: str, cmdline: str) -> str:
    """The role of one process of a server's tree: a model process (our worker, a warm template, Triton's Python
    stub) or the server's own (our front-end processes and the CLI around them, tritonserver)."""
    ours = kind(name) == "ours"
    model_side = "pytriton.backends." in cmdline if ours else "triton_python_backend_stub" in cmdline
    return roles(name)[1 if model_side else 0]


def cpu_by_pid(pids: list[int]) -> dict[int, float]:
    return {pid: procfs.cpu_seconds([pid]) for pid in pids}


def cpu_by_role(name: str, before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
    """CPU seconds each role used between two readings (a process born in between counts from 0)."""
    out = dict.fromkeys(roles(name), 0.0)
    for pid, cpu in after.items():
        out[role(name, procfs.cmdline(pid))] += max(0.0, cpu - before.get(pid, 0.0))
    return out


def pss_by_role(name: str, pids: list[int]) -> dict[str, int]:
    """PSS (KiB) of each role's processes."""
    out = dict.fromkeys(roles(name), 0)
    for pid in pids:
        out[role(name, procfs.cmdline(pid))] += procfs.memory_kib([pid])[1]
    return out


class TritonServer(Server):
    """tritonserver 2.51 on a model repository (its Python backend staged once in `backends`)."""

    def __init__(self, real: RealTriton, backends: pathlib.Path, repository: pathlib.Path, models: list[str],
                 logfile: pathlib.Path, cwd: pathlib.Path, base_env: dict[str, str]) -> None:
        super().__init__(ServerSpec("triton", real.venv_bin / "python", real.environment(base_env)), "dynamic",
                         models, logfile, cwd)
        self.real, self.backends, self.repository = real, backends, repository

    def cmd(self) -> list[str]:
        return self.real.command(self.backends, self.repository, self.http_port, self.grpc_port, self.metrics_port)

    def start(self, timeout_s: float) -> bool:
        """Server.start, with the process tree read every 0.1 s while it loads: should tritonserver die before it is
        ready (2.51 can abort while loading many Python models on a busy machine), its stubs and their /dev/shm
        regions are known, so that stop() waits for them, kills what is left and removes the regions."""
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.1):
                self.refresh_tree()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            return super().start(timeout_s)
        finally:
            done.set()
            watcher.join()

    def refresh_tree(self) -> list[int]:
        pids = super().refresh_tree()
        # (a stub is told its region by name: counted even if it is not mapped when the tree is read)
        self.shm_seen |= {f"/dev/shm/{r}" for pid in pids for r in stub_regions(procfs.cmdline(pid))}
        return pids

    def scan_log(self) -> list[str]:
        try:
            text = self.logfile.read_text(errors="replace")
        except OSError:
            return []
        bad = [line.strip() for line in text.splitlines()
               if (line.startswith("E") and line[1:5].isdigit() and not any(b in line for b in TRITON_BENIGN))
               or line.startswith(("terminate called", "  what():"))]  # (C++'s words when it aborts)
        return [f"triton: {len(bad)} error line(s) in {self.logfile}: {bad[0][:300]}"] if bad else []


def ours_server(python: pathlib.Path, repository: pathlib.Path, models: list[str], logfile: pathlib.Path,
                cwd: pathlib.Path, base_env: dict[str, str], *extra: str) -> Server:
    """`pytriton serve --model-repository R` from `python`'s venv, on loopback as tritonserver (its log checked for our
    package and errors)."""
    def argv(s: Server) -> list[str]:
        return [str(s.spec.python), "-m", "pytriton.cli", "serve", "--model-repository", str(repository),
                "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1", "--metrics-address", "127.0.0.1",
                "--http-port", str(s.http_port), "--grpc-port", str(s.grpc_port),
                "--metrics-port", str(s.metrics_port), *extra]
    return CmdServer(ServerSpec("ours", python, base_env), argv, models, logfile, cwd)


def base_environment() -> dict[str, str]:
    """This process's environment without what would change either server's behaviour."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GLIBC_TUNABLES", "LD_PRELOAD")}
