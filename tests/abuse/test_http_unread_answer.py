"""A keep-alive client that asks for a large answer and never reads it: the answer stalls, and the connection is
dropped once it has made no progress for the body timeout (`--http-body-timeout`), not only after the idle timeout
(which is much longer here); over HTTP and HTTPS. The answer's memory goes back with the connection."""

from __future__ import annotations

import http.client
import json
import socket
import ssl

import numpy as np
import pytest

from tests._support.serving import serve, tensor_args
from tests._support.sockets import ESTABLISHED, peer_state
from tests._support.waits import wait_until
from tests.tls.certs import make_certs

IDENTITY = tensor_args("input", [("IN_X", "uint8", "-1")]) + tensor_args("output", [("OUT_X", "uint8", "-1")])
BODY_TIMEOUT = 1.0
IDLE_TIMEOUT = 600.0
ANSWER = 32 << 20  # far more than the kernel buffers of a loopback connection hold
LATE_S = 10.0


@pytest.fixture(scope="module", params=["http", "https"])
def server(request, tmp_path_factory):
    tls: list[str] = []
    context = None
    if request.param == "https":
        certs = make_certs(tmp_path_factory.mktemp("certs"))
        tls = ["--http-use-ssl", "--http-server-cert", certs.server_pem, "--http-server-key", certs.server_key]
        context = ssl.create_default_context(cafile=certs.ca_pem)
    with serve("tests.models:identity", *IDENTITY, "--max-batch-size", "0", "--http-body-timeout", str(BODY_TIMEOUT),
               "--http-idle-timeout", str(IDLE_TIMEOUT), *tls) as running:
        yield running, context
    assert "Traceback" not in running.log, running.log


def _request() -> bytes:
    header = json.dumps({"inputs": [{"name": "IN_X", "datatype": "UINT8", "shape": [ANSWER],
                                     "parameters": {"binary_data_size": ANSWER}}],
                         "outputs": [{"name": "OUT_X", "parameters": {"binary_data": True}}]}).encode()
    body = header + np.ones(ANSWER, dtype=np.uint8).tobytes()
    return (f"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: {len(header)}"
            f"\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


def test_unread_answer_on_a_keep_alive_connection_is_dropped(server):
    running, context = server
    host, port = running.http_url.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    if context is not None:
        sock = context.wrap_socket(sock, server_hostname="localhost")
    with sock:
        sock.sendall(_request())
        # The answer is computed and stalls for longer than the body timeout (what is tested): nothing is read
        # meanwhile, and the test waits for the server's drop (its end of the connection leaves ESTABLISHED), within
        # a bound, rather than reading after a guessed time (reading before the drop would be progress, and put it off).
        wait_until(lambda: peer_state(sock) != ESTABLISHED, "the server drops the connection",
                   BODY_TIMEOUT * 2 + LATE_S)
        sock.settimeout(LATE_S)
        received = 0
        try:
            while chunk := sock.recv(1 << 20):  # what the kernel buffers held, then the end
                received += len(chunk)
        except (ConnectionResetError, ssl.SSLError):
            pass
        except TimeoutError:
            pytest.fail(f"the connection was kept: {received} bytes of the answer arrived and then nothing")
        assert received < ANSWER
    # the server goes on serving
    connection = (http.client.HTTPSConnection(host, int(port), context=context, timeout=LATE_S) if context
                  else http.client.HTTPConnection(host, int(port), timeout=LATE_S))
    try:
        connection.request("GET", "/v2/health/ready")
        assert connection.getresponse().status == 200
    finally:
        connection.close()
