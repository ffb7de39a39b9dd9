"""The real tritonserver 2.51 (the one nvidia-pytriton 0.7.0 bundles), started on a repository of Python models to
see what Triton does; tests that use it are skipped where it is not installed (REAL_TRITONSERVER_ENV)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

# The site-packages folder holding nvidia-pytriton 0.7.0's `pytriton/tritonserver` and its `nvidia_pytriton.libs`
REAL_TRITONSERVER_ENV = "PYTRITON_REAL_TRITONSERVER_SITE"
REAL_SITE = Path(os.environ.get(REAL_TRITONSERVER_ENV, "/tmp/nvpt/lib/python3.11/site-packages"))
REAL_TRITONSERVER = REAL_SITE / "pytriton" / "tritonserver" / "bin" / "tritonserver"
NOT_INSTALLED = f"the real tritonserver 2.51 is not installed (set {REAL_TRITONSERVER_ENV})"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def real_tritonserver(repository: Path, scratch: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Serve `repository` (model control mode none) until the block ends; yields its gRPC URL. `scratch`: an empty
    folder for its backends; `env`: added to its environment (and so to its Python stubs')."""
    package = REAL_SITE / "pytriton" / "tritonserver"
    backends = scratch / "backends"
    shutil.copytree(package / "backends" / "python", backends / "python")
    shutil.copy(package / "python_backend_stubs" / "3.11" / "triton_python_backend_stub", backends / "python")
    ports = [str(_free_port()) for _ in range(3)]
    # (the stub's numpy must be that of the venv nvidia-pytriton is installed in)
    environ = dict(os.environ, **(env or {}),
                   LD_LIBRARY_PATH=f"{REAL_SITE / 'nvidia_pytriton.libs'}:/root/.pyenv/versions/3.11.7/lib",
                   PATH=f"{REAL_SITE.parents[2] / 'bin'}:{os.environ.get('PATH', '')}")
    process = subprocess.Popen(
        [str(REAL_TRITONSERVER), "--backend-directory", str(backends), "--model-repository", str(repository),
         "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1", "--metrics-address", "127.0.0.1",
         "--http-port", ports[0], "--grpc-port", ports[1], "--metrics-port", ports[2]],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ)
    started = threading.Event()

    def read() -> None:  # (its log, read to the end: a full pipe would stop it)
        assert process.stdout is not None
        for line in process.stdout:
            if "Started GRPCInferenceService" in line:
                started.set()
        started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        started.wait(120)
        if process.poll() is not None:
            raise RuntimeError("tritonserver did not start")
        yield f"127.0.0.1:{ports[1]}"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(10)
