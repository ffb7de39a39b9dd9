"""README's PyTriton quick start runs as is: the server block in one process, the client block in another."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests._support.paths import REPO
from tests._support.processes import started_pids


def code_block(marker: str) -> str:
    text = (REPO / "README.md").read_text()
    match = re.search(rf"<!-- {marker} -->\s*```python\n(.*?)```", text, re.S)
    assert match, f"README has no python block after <!-- {marker} -->"
    return match.group(1)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_quick_start_as_written(tmp_path):
    if not port_free(8000):
        pytest.skip("the quick start's client uses localhost:8000, which is taken on this machine")
    server_code = code_block("readme-quickstart-server")
    client_code = code_block("readme-quickstart-client")
    (tmp_path / "server.py").write_text(server_code)
    (tmp_path / "client.py").write_text(client_code)
    # Only the ports the client does not use are moved (PyTriton's documented environment configuration).
    env = dict(os.environ, PYTRITON_TRITON_CONFIG_GRPC_PORT="0", PYTRITON_TRITON_CONFIG_METRICS_PORT="0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    server = subprocess.Popen([sys.executable, "server.py"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    started_pids.add(server.pid)
    try:
        deadline = time.monotonic() + 60
        output = ""
        while time.monotonic() < deadline:
            client = subprocess.run([sys.executable, "client.py"], cwd=tmp_path, env=env, capture_output=True,
                                    text=True, timeout=120)
            output = client.stdout + client.stderr
            if client.returncode == 0:
                break
            time.sleep(0.5)
        assert client.returncode == 0, output
        assert "'result': array([-1., -2.], dtype=float32)" in output
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(60)
    assert server.returncode == 0
