"""HTTPS and mutual TLS on the HTTP port (`--http-use-ssl`, `--http-use-ssl-mutual`; pytriton's own options),
through tritonclient.http with `ssl=True, ssl_context_factory=...`: answers over TLS; a plain-text client fails
fast; mutual TLS refuses clients without a certificate or with one from another CA and goes on serving the right
one; failed handshakes are logged once per peer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from geventhttpclient.response import HTTPConnectionClosed

from tests._support.paths import REPO
from tests._support.serving import serve, tensor_args
from tests.tls.certs import Certs, http_context_factory, make_certs
from tests.tls.logs import assert_logged_at_most_once_a_minute

ADD_SUB = ["--max-batch-size", "8"] + tensor_args(
    "input", [("INPUT0", "int32", "16"), ("INPUT1", "int32", "16")]
) + tensor_args("output", [("OUTPUT0", "int32", "16"), ("OUTPUT1", "int32", "16")])
FAIL_FAST_S = 5.0
HANDSHAKE_TIMEOUT_S = 2.0  # --http-header-timeout, which bounds the handshake too


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def https_server(certs):
    with serve("tests.models:add_sub", *ADD_SUB, "--http-use-ssl", "--http-server-cert", certs.server_pem,
               "--http-server-key", certs.server_key, "--http-header-timeout", str(HANDSHAKE_TIMEOUT_S)) as server:
        yield server


@pytest.fixture(scope="module")
def mtls_server(certs):
    with serve("tests.models:add_sub", *ADD_SUB, "--http-use-ssl-mutual", "true", "--http-server-cert",
               certs.server_pem, "--http-server-key", certs.server_key, "--http-root-cert", certs.ca_pem) as server:
        yield server


def _client(server, certs: Certs, client: str | None = None) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(server.http_url, ssl=True,
                                            ssl_context_factory=http_context_factory(certs, client))


def _check_infer(client: httpclient.InferenceServerClient) -> None:
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = httpclient.InferInput(name, [1, 16], "INT32")
        tensor.set_data_from_numpy(a, binary_data=name == "INPUT0")
        inputs.append(tensor)
    result = client.infer("add_sub", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * a)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), 0 * a)


def _refused(client: httpclient.InferenceServerClient) -> None:
    started = time.monotonic()
    with pytest.raises((HTTPConnectionClosed, OSError)):  # the connection closed (or reset, or an SSL alert)
        client.is_server_live()
    assert time.monotonic() - started < FAIL_FAST_S
    client.close()


def test_infer_over_https(https_server, certs):
    client = _client(https_server, certs)
    try:
        assert client.is_server_ready()
        assert client.get_model_metadata("add_sub")["name"] == "add_sub"
        _check_infer(client)
    finally:
        client.close()


def test_plain_text_client_fails_fast_and_is_logged_once(https_server, certs):
    for _ in range(3):
        _refused(httpclient.InferenceServerClient(https_server.http_url, network_timeout=30))
    client = _client(https_server, certs)
    try:
        _check_infer(client)  # the server is still up
    finally:
        client.close()
    line = f"HTTP port {https_server.ports['HTTPService']}: TLS handshake with 127.0.0.1:"
    assert_logged_at_most_once_a_minute(https_server, line)


def test_mutual_tls_refuses_clients_without_the_right_certificate(mtls_server, certs):
    _refused(_client(mtls_server, certs))
    _refused(_client(mtls_server, certs, "other_client"))
    _refused(httpclient.InferenceServerClient(mtls_server.http_url, network_timeout=30))
    client = _client(mtls_server, certs, "client")
    try:
        assert client.is_server_live()
        _check_infer(client)
    finally:
        client.close()


def test_a_silent_connection_is_closed_after_the_handshake_timeout_and_blocks_no_one(https_server, certs):
    with socket.create_connection(("127.0.0.1", https_server.ports["HTTPService"])) as silent:
        started = time.monotonic()
        client = _client(https_server, certs)  # served while the silent connection holds its handshake open
        try:
            _check_infer(client)
        finally:
            client.close()
        silent.settimeout(HANDSHAKE_TIMEOUT_S + 10)
        try:
            assert silent.recv(1024) == b""  # closed by the server
        except ConnectionResetError:
            pass  # (or reset)
        assert HANDSHAKE_TIMEOUT_S - 0.5 < time.monotonic() - started < HANDSHAKE_TIMEOUT_S + 5


def test_container_healthcheck_over_https(https_server, mtls_server, certs):
    """deploy/healthcheck.py (the image's HEALTHCHECK) asks over HTTPS with PYTRITON_HEALTHCHECK_CA (and a client
    certificate for mutual TLS); plain HTTP against the TLS port fails."""
    def check(server, **env: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, PYTRITON_HEALTHCHECK_PORT=str(server.ports["HTTPService"]), **env)
        return subprocess.run([sys.executable, str(REPO / "deploy" / "healthcheck.py")], env=env,
                              capture_output=True, text=True, timeout=30, check=False)

    assert check(https_server).returncode == 1
    result = check(https_server, PYTRITON_HEALTHCHECK_CA=certs.ca_pem)
    assert result.returncode == 0, result.stderr
    assert check(mtls_server, PYTRITON_HEALTHCHECK_CA=certs.ca_pem).returncode == 1
    result = check(mtls_server, PYTRITON_HEALTHCHECK_CA=certs.ca_pem, PYTRITON_HEALTHCHECK_CERT=certs.client_pem,
                   PYTRITON_HEALTHCHECK_KEY=certs.client_key)
    assert result.returncode == 0, result.stderr
    result = check(https_server, PYTRITON_HEALTHCHECK_CA=str(REPO / "no-such-ca.pem"))
    assert result.returncode == 1 and result.stderr.startswith("pytriton-healthcheck: cannot load the TLS files")
