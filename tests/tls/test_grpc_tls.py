"""gRPC over TLS and mutual TLS (`--grpc-use-ssl`, `--grpc-use-ssl-mutual`), on the h2 transport and on the grpcio
fallback, through tritonclient.grpc: infer, stream infer and system shared memory over TLS; a plain-text client
fails fast; mutual TLS refuses clients without a certificate or with one from another CA, and the server goes on
serving the right client."""

from __future__ import annotations

import queue
import time
import uuid

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tests._support.serving import serve, tensor_args
from tests.tls.certs import Certs, make_certs
from tests.tls.logs import assert_logged_at_most_once_a_minute

ADD_SUB = ["--max-batch-size", "8"] + tensor_args(
    "input", [("INPUT0", "int32", "16"), ("INPUT1", "int32", "16")]
) + tensor_args("output", [("OUTPUT0", "int32", "16"), ("OUTPUT1", "int32", "16")])
IMPLEMENTATIONS = ["h2", "grpcio"]
FAIL_FAST_S = 5.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _tls_args(certs: Certs, mutual: bool) -> list[str]:
    args = ["--grpc-use-ssl-mutual" if mutual else "--grpc-use-ssl", "--grpc-server-cert", certs.server_pem,
            "--grpc-server-key", certs.server_key]
    return args + (["--grpc-root-cert", certs.ca_pem] if mutual else [])


@pytest.fixture(scope="module", params=IMPLEMENTATIONS)
def tls_server(request, certs):
    with serve("tests.models:add_sub", *ADD_SUB, *_tls_args(certs, mutual=False),
               env={"PYTRITON_GRPC_SERVER": request.param}) as server:
        server.implementation = request.param
        yield server


@pytest.fixture(scope="module", params=IMPLEMENTATIONS)
def mtls_server(request, certs):
    with serve("tests.models:add_sub", *ADD_SUB, *_tls_args(certs, mutual=True),
               env={"PYTRITON_GRPC_SERVER": request.param}) as server:
        server.implementation = request.param
        yield server


def _inputs(a: np.ndarray, b: np.ndarray) -> list[grpcclient.InferInput]:
    inputs = []
    for name, array in (("INPUT0", a), ("INPUT1", b)):
        tensor = grpcclient.InferInput(name, list(array.shape), "INT32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def _check_infer(client: grpcclient.InferenceServerClient) -> None:
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    result = client.infer("add_sub", _inputs(a, b))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def _client(server, certs: Certs, **kwargs) -> grpcclient.InferenceServerClient:
    return grpcclient.InferenceServerClient(server.grpc_url, ssl=True, root_certificates=certs.ca_pem, **kwargs)


def _refused(client: grpcclient.InferenceServerClient) -> InferenceServerException:
    started = time.monotonic()
    with pytest.raises(InferenceServerException) as info:
        client.is_server_live()
    assert time.monotonic() - started < FAIL_FAST_S
    assert info.value.status() == "StatusCode.UNAVAILABLE", info.value
    return info.value


def test_infer_over_tls(tls_server, certs):
    with _client(tls_server, certs) as client:
        assert client.is_server_ready()
        _check_infer(client)


def test_stream_infer_over_tls(tls_server, certs):
    answers: queue.Queue = queue.Queue()
    with _client(tls_server, certs) as client:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        try:
            for i in range(3):
                a = np.full((1, 16), i, dtype=np.int32)
                client.async_stream_infer("add_sub", _inputs(a, a), request_id=str(i))
            for _ in range(3):
                result, error = answers.get(timeout=30)
                assert error is None, error
                i = int(result.get_response().id)
                np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 16), 2 * i, dtype=np.int32))
        finally:
            client.stop_stream()


def test_system_shared_memory_over_tls(tls_server, certs):
    key = f"/pt_tls_{uuid.uuid4().hex[:8]}"
    handle = shm.create_shared_memory_region("tls_in", key, 128)
    try:
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        shm.set_shared_memory_region(handle, [a, a])
        with _client(tls_server, certs) as client:
            client.register_system_shared_memory("tls_in", key, 128)
            try:
                status = client.get_system_shared_memory_status()
                assert "tls_in" in status.regions
                inputs = _inputs(a, a)
                inputs[0].set_shared_memory("tls_in", 64, offset=0)
                inputs[1].set_shared_memory("tls_in", 64, offset=64)
                result = client.infer("add_sub", inputs)
                np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * a)
            finally:
                client.unregister_system_shared_memory("tls_in")
    finally:
        shm.destroy_shared_memory_region(handle)


def test_plain_text_client_fails_fast(tls_server, certs):
    with grpcclient.InferenceServerClient(tls_server.grpc_url) as client:
        _refused(client)
    with _client(tls_server, certs) as client:  # the server is still up
        _check_infer(client)


def test_failed_handshakes_are_logged_once_per_peer(tls_server):
    if tls_server.implementation != "h2":
        pytest.skip("grpcio logs handshake failures itself (GRPC_VERBOSITY)")
    for _ in range(3):
        with grpcclient.InferenceServerClient(tls_server.grpc_url) as client:
            _refused(client)
    line = f"gRPC port {tls_server.port}: TLS handshake with 127.0.0.1:"
    assert_logged_at_most_once_a_minute(tls_server, line)


def test_mutual_tls_refuses_a_client_without_a_certificate(mtls_server, certs):
    with _client(mtls_server, certs) as client:
        _refused(client)
    with _client(mtls_server, certs, private_key=certs.client_key, certificate_chain=certs.client_pem) as client:
        _check_infer(client)


def test_mutual_tls_refuses_a_certificate_of_another_ca(mtls_server, certs):
    with _client(mtls_server, certs, private_key=certs.other_client_key,
                 certificate_chain=certs.other_client_pem) as client:
        _refused(client)
    with _client(mtls_server, certs, private_key=certs.client_key, certificate_chain=certs.client_pem) as client:
        _check_infer(client)


def test_mutual_tls_serves_the_right_client_after_refused_ones(mtls_server, certs):
    for kwargs in ({}, {"private_key": certs.other_client_key, "certificate_chain": certs.other_client_pem}):
        with _client(mtls_server, certs, **kwargs) as client:
            _refused(client)
    with grpcclient.InferenceServerClient(mtls_server.grpc_url) as client:
        _refused(client)
    with _client(mtls_server, certs, private_key=certs.client_key, certificate_chain=certs.client_pem) as client:
        assert client.is_server_live()
        _check_infer(client)
    if mtls_server.implementation == "h2":  # refusals logged once a minute
        line = f"gRPC port {mtls_server.port}: TLS handshake with 127.0.0.1:"
        assert_logged_at_most_once_a_minute(mtls_server, line)
