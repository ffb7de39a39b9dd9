"""`pytriton serve --frontend-processes 2` started twice on the same ports: the front-end processes listen with
SO_REUSEPORT, which the kernel grants to any socket of the same user that asks for it too, so a second group must
be refused (the port is taken) instead of silently sharing the first one's connections."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests._support.paths import REPO
from tests._support.serving import serve, tensor_args

ARGS = ["tests.frontend_models:server_pid", *tensor_args("input", [("IN", "fp32", "-1")]),
        *tensor_args("output", [("OUT", "fp32", "-1"), ("SERVER", "int64", "1")]), "--frontend-processes", "2"]


@pytest.mark.parametrize("protocol, service, option", [("gRPC", "GRPCInferenceService", "grpc"),
                                                       ("HTTP", "HTTPService", "http")])
def test_a_second_group_on_the_same_port_is_refused(protocol, service, option):
    with serve(*ARGS) as first:
        port = first.ports[service]
        other = "http" if option == "grpc" else "grpc"
        command = [sys.executable, "-m", "pytriton.cli", "serve", *ARGS, f"--{option}-address", "127.0.0.1",
                   f"--{option}-port", str(port), f"--{other}-port", "0", "--metrics-port", "0"]
        try:
            result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=30, check=False)
        except subprocess.TimeoutExpired as exc:  # (it started: it serves the first group's port beside it)
            raise AssertionError(f"a second group started on {protocol} port {port}") from exc
        assert result.returncode != 0
        assert f"cannot listen for {protocol} on 127.0.0.1:{port}" in result.stderr, result.stderr
        assert first.process.poll() is None  # the first group serves on
