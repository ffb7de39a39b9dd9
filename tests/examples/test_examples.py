"""Every example under examples/ runs as a newcomer runs it: the server script in one process (on free loopback
ports), each client script in another; the clients' printed answers are checked, and the server stops cleanly on
Ctrl-C leaving no process or /dev/shm segment behind (the session fixture in tests/conftest.py checks both)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytriton.config.gpus import gpu_available
from tests._support.paths import REPO
from tests._support.processes import started_pids

EXAMPLES = REPO / "examples"
SERVING_RE = re.compile(r"serving (\w+): http=(\S+) grpc=(\S+) metrics=(\S+)")
CLIENT_TIMEOUT_S = 60


def _descendants(pid: int) -> set[int]:
    """The processes started (directly or not) by `pid`: Triton()'s server process and its workers."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class ExampleServer:
    """An example's server script on port 0 everywhere; its addresses from the "serving ..." line it prints."""

    def __init__(self, script: str, *args: str, timeout_s: float = 60.0):
        command = [sys.executable, str(EXAMPLES / script), "--http-port", "0", "--grpc-port", "0",
                   "--metrics-port", "0", *args]
        env = dict(os.environ, PYTRITON_EXIT_WITH_PARENT="1")
        self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        started_pids.add(self.process.pid)
        self.lines: list[str] = []
        self.urls: dict[str, str] = {}
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout_s) or not self.urls:
            self.stop()
            raise RuntimeError(f"{script} did not print its 'serving' line; output:\n{self.output}")
        started_pids.update(_descendants(self.process.pid))

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            match = SERVING_RE.search(line)
            if match:
                self.model = match.group(1)
                self.urls = {"http": match.group(2), "grpc": match.group(3), "metrics": match.group(4)}
                self._ready.set()
        self._ready.set()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        started_pids.update(_descendants(self.process.pid))
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # what Ctrl-C does
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)
        return self.process.returncode


@contextlib.contextmanager
def started(script: str, *args: str) -> Iterator[ExampleServer]:
    server = ExampleServer(script, *args)
    try:
        yield server
    finally:
        code = server.stop()
        assert code == 0, f"{script} exited with {code}; output:\n{server.output}"


def run_client(script: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=REPO, capture_output=True,
                            text=True, timeout=CLIENT_TIMEOUT_S, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{script} failed:\n{output}"
    return output


# ---- examples/linear: Triton().bind + four clients ---------------------------------------------------------------

@pytest.fixture(scope="module")
def linear():
    with started("linear/server.py") as server:
        yield server


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_linear_model_client(linear, scheme):
    url = linear.urls[scheme] if scheme == "http" else f"grpc://{linear.urls['grpc']}"
    output = run_client("linear/client_model_client.py", "--url", url)
    assert "sample: [3. 5. 7.]" in output
    assert "batch: [[1.0, 3.0, 5.0], [7.0, 9.0, 11.0]]" in output


def test_linear_tritonclient_grpc(linear):
    output = run_client("linear/client_tritonclient_grpc.py", "--url", linear.urls["grpc"])
    assert "server ready: True model ready: True" in output
    assert "result: [[3.0, 5.0, 7.0]]" in output


def test_linear_tritonclient_http(linear):
    output = run_client("linear/client_tritonclient_http.py", "--url", linear.urls["http"])
    assert "result: [[3.0, 5.0, 7.0], [9.0, 11.0, 13.0]]" in output
    assert "max_batch_size: 64" in output


def test_linear_asyncio_client(linear):
    output = run_client("linear/client_asyncio.py", "--url", linear.urls["http"])
    for i in range(8):
        assert f"{i} -> {[2.0 * i + 1] * 4}" in output


# ---- examples/streaming: a decoupled token generator -------------------------------------------------------------

@pytest.fixture(scope="module")
def streaming():
    with started("streaming/server.py", "--token-delay", "0.01") as server:
        yield server


def test_streaming_decoupled_client(streaming):
    output = run_client("streaming/client_decoupled.py", "--url", f"grpc://{streaming.urls['grpc']}",
                        "--prompt", "hello there", "--max-tokens", "5")
    assert "hello there is a fine \n5 tokens in" in output


def test_streaming_tritonclient_stream(streaming):
    output = run_client("streaming/client_grpc_stream.py", "--url", streaming.urls["grpc"], "--prompt", "one",
                        "--max-tokens", "12")
    assert "one is a fine thing to stream one token at a time \n12 tokens" in output


# ---- examples/torch_cuda_shm: torch on the GPU, CUDA shared memory -----------------------------------------------

def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


GPU_READY = all(_has(m) for m in ("torch", "cupy", "cuda")) and gpu_available()


def test_torch_cuda_shm_server_starts_without_touching_cuda():
    # The server and its model load need no GPU (torch is imported by the first request, in the worker).
    with started("torch_cuda_shm/server.py", "--access-token", "secret") as server:
        assert server.model == "TorchLinear"


@pytest.mark.skipif(not GPU_READY, reason="needs a GPU, torch, cupy (pytriton[gpu]) and cuda-python")
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_torch_cuda_shm_client(protocol):
    with started("torch_cuda_shm/server.py", "--access-token", "secret") as server:
        output = run_client("torch_cuda_shm/client.py", "--url", server.urls[protocol], "--protocol", protocol,
                            "--access-token", "secret")
        assert "matches numpy: True" in output


# ---- every example is covered ------------------------------------------------------------------------------------

COVERED = {
    "add_sub.py",  # scripts/demo's model; served by tests/cli/test_cli.py, tests/e2e and scripts/soak
    "linear/server.py", "linear/client_model_client.py", "linear/client_tritonclient_grpc.py",
    "linear/client_tritonclient_http.py", "linear/client_asyncio.py",
    "streaming/server.py", "streaming/client_decoupled.py", "streaming/client_grpc_stream.py",
    "torch_cuda_shm/server.py", "torch_cuda_shm/client.py", "torch_cuda_shm/model.py",
    # (tests/examples/test_llm_example.py)
    "llm/model.py", "llm/client_openai.py", "llm/client_grpc_stream.py",
}


def test_every_example_has_a_test():
    scripts = {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.py") if p.name != "__init__.py"}
    assert scripts - COVERED == set(), "an example without a test here: add it to this file (or the one that tests it)"
    assert COVERED - scripts == set(), "COVERED names an example that no longer exists"
    for directory in {Path(s).parent for s in scripts if "/" in s}:
        assert (EXAMPLES / directory / "README.md").is_file(), f"examples/{directory} has no README.md"
