"""The real tritonserver 2.51 (the one nvidia-pytriton 0.7.0 bundles), started on a repository of Python models to
see what Triton does; tests that use it are skipped where it is not installed (REAL_TRITONSERVER_ENV)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from tests._support.paths import SCRIPTS

if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from bench_lib.real_triton import SHM_PREFIX, RealTriton  # noqa: E402 (scripts/ put on the path just above)

# The site-packages folder holding nvidia-pytriton 0.7.0's `pytriton/tritonserver` and its `nvidia_pytriton.libs`
REAL_TRITONSERVER_ENV = "PYTRITON_REAL_TRITONSERVER_SITE"
REAL_SITE = Path(os.environ.get(REAL_TRITONSERVER_ENV, "/tmp/nvpt/lib/python3.11/site-packages"))
REAL = RealTriton(REAL_SITE)
REAL_TRITONSERVER = REAL.binary
NOT_INSTALLED = f"the real tritonserver 2.51 is not installed (set {REAL_TRITONSERVER_ENV})"
T = TypeVar("T")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def real_tritonserver(repository: Path, scratch: Path, env: dict[str, str] | None = None,
                      args: tuple[str, ...] = (), log: list[str] | None = None,
                      urls: dict[str, str] | None = None) -> Iterator[str]:
    """Serve `repository` (model control mode none unless `args` say otherwise) until the block ends; yields its gRPC
    URL. `scratch`: an empty folder for its backends; `env`: added to its environment (and so to its Python stubs');
    `args`: more tritonserver options; `log`: gets its log lines (all of them once the block ends, or once it raised
    RuntimeError: it did not start); `urls`: gets its "grpc", "http" and "metrics" addresses (host:port), the block
    starting once its HTTP port also listens."""
    backends = REAL.stage_backends(scratch / "backends")
    ports = [_free_port() for _ in range(3)]
    # (the stub's numpy must be that of the venv nvidia-pytriton is installed in: REAL.environment puts its bin first)
    environ = REAL.environment(dict(os.environ, **(env or {})))
    process = subprocess.Popen(
        REAL.command(backends, repository, ports[0], ports[1], ports[2], *args),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ, start_new_session=True)
    started = threading.Event()
    serving = threading.Event()
    http_serving = threading.Event()

    def read() -> None:  # (its log, read to the end: a full pipe would stop it)
        assert process.stdout is not None
        for line in process.stdout:
            if log is not None:
                log.append(line)
            if "Started HTTPService" in line:
                http_serving.set()
            if "Started GRPCInferenceService" in line:
                serving.set()
                started.set()
        started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        for _ in range(1200):  # (its Python stubs may keep its log open after it exited: watch both, 120 s at most)
            if started.wait(0.1) or process.poll() is not None:
                break
        if not serving.is_set() or process.poll() is not None:
            process.wait(60)
            raise RuntimeError("tritonserver did not start")
        if urls is not None:
            if not http_serving.wait(60):
                raise RuntimeError("tritonserver's HTTP port did not start")
            urls.update(grpc=f"127.0.0.1:{ports[1]}", http=f"127.0.0.1:{ports[0]}", metrics=f"127.0.0.1:{ports[2]}")
        # tritonserver 2.51 logs "Started HTTPService" about 40 ms before that port takes connections (measured
        # here: 38 refusals in a row after the line, 12 starts of 12): the block starts once both ports do
        for port in (ports[1], ports[0]):
            _wait_accepting(port, process)
        yield f"127.0.0.1:{ports[1]}"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        _stop_left_stubs(process.pid)
        reader.join(10)


def asked_of_real_tritonserver(repository: Path, ask: Callable[..., T], args: tuple[str, ...] = (),
                               metrics: bool = False) -> T:
    """What `ask(http_address, grpc_address)` returns while the real tritonserver serves `repository` (with `args`);
    with `metrics`, `ask(http_address, grpc_address, metrics_address)`."""
    with tempfile.TemporaryDirectory() as scratch:
        urls: dict[str, str] = {}
        with real_tritonserver(repository, Path(scratch), urls=urls, args=args) as grpc_url:
            return ask(urls["http"], grpc_url, urls["metrics"]) if metrics else ask(urls["http"], grpc_url)


def _wait_accepting(port: int, process: subprocess.Popen[str], limit_s: float = 60.0) -> None:
    """Return once 127.0.0.1:`port` accepts a connection; RuntimeError if `process` exits first or `limit_s` passes."""
    deadline = time.monotonic() + limit_s
    while True:
        with socket.socket() as probe:
            try:
                probe.connect(("127.0.0.1", port))
                return
            except ConnectionRefusedError:
                pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"tritonserver's port {port} does not take connections")
        time.sleep(0.002)


def _stop_left_stubs(group: int) -> None:
    """Kill what is left of the process group `group` (tritonserver 2.51 leaves a Python stub running after a
    failed load, and exits) and remove the shared memory regions those stubs name."""
    regions = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getpgid(int(proc.name)) != group:
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            continue
        regions += [arg.decode() for arg in argv if arg.startswith(SHM_PREFIX.encode())]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    for region in regions:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"/dev/shm/{region}")
