"""Large tensors over TLS: 8 MiB requests and responses, several calls at once on one connection, through gRPC (both
transports) and HTTPS — the encrypted transport's flow control (pause/resume writing) with our buffers."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import ssl

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests._support.serving import serve, tensor_args
from tests.tls.certs import Certs, http_context_factory, make_certs

IDENTITY = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")])
ELEMENTS = 2 * 1024 * 1024  # 8 MiB of float32


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module", params=["h2", "grpcio"])
def server(request, certs):
    tls = []
    for service in ("grpc", "http"):
        tls += [f"--{service}-use-ssl", f"--{service}-server-cert", certs.server_pem, f"--{service}-server-key",
                certs.server_key]
    with serve("tests.models:identity", *IDENTITY, *tls, env={"PYTRITON_GRPC_SERVER": request.param}) as server:
        yield server


def test_large_tensors_over_grpc_tls(server, certs):
    with grpcclient.InferenceServerClient(server.grpc_url, ssl=True, root_certificates=certs.ca_pem) as client:
        def call(seed: int) -> None:
            data = np.random.default_rng(seed).random(ELEMENTS, dtype=np.float32)
            tensor = grpcclient.InferInput("IN_X", [ELEMENTS], "FP32")
            tensor.set_data_from_numpy(data)
            np.testing.assert_array_equal(client.infer("identity", [tensor]).as_numpy("OUT_X"), data)

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(call, range(4)))


def test_large_tensors_over_https(server, certs):
    client = httpclient.InferenceServerClient(server.http_url, ssl=True,
                                              ssl_context_factory=http_context_factory(certs), network_timeout=60)
    try:
        for seed in range(2):
            data = np.random.default_rng(seed).random(ELEMENTS, dtype=np.float32)
            tensor = httpclient.InferInput("IN_X", [ELEMENTS], "FP32")
            tensor.set_data_from_numpy(data, binary_data=True)
            result = client.infer("identity", [tensor], outputs=[httpclient.InferRequestedOutput("OUT_X",
                                                                                                  binary_data=True)])
            np.testing.assert_array_equal(result.as_numpy("OUT_X"), data)
    finally:
        client.close()


def test_large_body_sent_right_after_the_handshake(server, certs):
    """A client that sends an 8 MiB request as soon as its side of the handshake is done (curl, requests): the body's
    first bytes arrive with the handshake's last message and are handed over before the protocol reads the rest."""
    context = ssl.create_default_context(cafile=certs.ca_pem)
    data = np.random.default_rng(7).random(ELEMENTS, dtype=np.float32)
    header = json.dumps({"inputs": [{"name": "IN_X", "datatype": "FP32", "shape": [ELEMENTS],
                                     "parameters": {"binary_data_size": data.nbytes}}],
                         "outputs": [{"name": "OUT_X", "parameters": {"binary_data": True}}]}).encode()
    host, port = server.http_url.rsplit(":", 1)
    for _ in range(2):
        connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=60)
        try:
            connection.request("POST", "/v2/models/identity/infer", header + data.tobytes(),
                               {"Inference-Header-Content-Length": str(len(header))})
            response = connection.getresponse()
            body = response.read()
            assert response.status == 200, body[:300]
            size = int(response.getheader("Inference-Header-Content-Length"))
            np.testing.assert_array_equal(np.frombuffer(body[size:], dtype=np.float32), data)
        finally:
            connection.close()
