"""Large tensors (20 MiB) round-trip byte-exact over gRPC and HTTP (binary) through tritonclient.

A 20 MiB request arrives in many DATA frames and TCP reads and is received straight into its message buffer;
its answer leaves from the worker's output segment by direct socket writes, past the socket's buffer.
"""

from __future__ import annotations

import concurrent.futures
import socket

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests._support.serving import serve, tensor_args

MIB = 1 << 20
IDENTITY = ["--max-batch-size", "0"] + tensor_args("input", [("IN_X", "uint8", "-1"), ("IN_Y", "fp32", "-1")]) \
    + tensor_args("output", [("OUT_X", "uint8", "-1"), ("OUT_Y", "fp32", "-1")])


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:identity", *IDENTITY) as process:
        yield process


def _tensors(seed: int, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, nbytes, dtype=np.uint8),
            rng.random(nbytes // 4 + 1, dtype=np.float32))


def _grpc_infer(client: grpcclient.InferenceServerClient, x: np.ndarray, y: np.ndarray) -> tuple:
    inputs = [grpcclient.InferInput("IN_X", [x.size], "UINT8"), grpcclient.InferInput("IN_Y", [y.size], "FP32")]
    inputs[0].set_data_from_numpy(x)
    inputs[1].set_data_from_numpy(y)
    result = client.infer("identity", inputs)
    return result.as_numpy("OUT_X"), result.as_numpy("OUT_Y")


def _http_infer(client: httpclient.InferenceServerClient, x: np.ndarray, y: np.ndarray) -> tuple:
    inputs = [httpclient.InferInput("IN_X", [x.size], "UINT8"), httpclient.InferInput("IN_Y", [y.size], "FP32")]
    inputs[0].set_data_from_numpy(x, binary_data=True)
    inputs[1].set_data_from_numpy(y, binary_data=True)
    outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in ("OUT_X", "OUT_Y")]
    result = client.infer("identity", inputs, outputs=outputs)
    return result.as_numpy("OUT_X"), result.as_numpy("OUT_Y")


def test_grpc_20_mib_round_trips_byte_exact(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        # the same size twice (the connection's message buffer is reused), then odd sizes, larger and smaller
        for seed, nbytes in enumerate((20 * MIB, 20 * MIB, 20 * MIB + 13, 3 * MIB + 1, 20 * MIB)):
            x, y = _tensors(seed, nbytes)
            got_x, got_y = _grpc_infer(client, x, y)
            assert got_x.tobytes() == x.tobytes(), f"request {seed}: OUT_X differs"
            assert got_y.tobytes() == y.tobytes(), f"request {seed}: OUT_Y differs"
    finally:
        client.close()


def test_grpc_concurrent_large_requests_on_one_connection(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    pairs = [_tensors(10 + i, 20 * MIB + i) for i in range(4)]
    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda pair: _grpc_infer(client, *pair), pairs))
    finally:
        client.close()
    for (x, y), (got_x, got_y) in zip(pairs, results):
        assert got_x.tobytes() == x.tobytes()
        assert got_y.tobytes() == y.tobytes()


def test_http_20_mib_binary_round_trips_byte_exact(server):
    client = httpclient.InferenceServerClient(server.http_url, connection_timeout=60, network_timeout=60)
    try:
        for seed, nbytes in enumerate((20 * MIB, 20 * MIB, 20 * MIB + 13, 3 * MIB + 1)):
            x, y = _tensors(100 + seed, nbytes)
            got_x, got_y = _http_infer(client, x, y)
            assert got_x.tobytes() == x.tobytes(), f"request {seed}: OUT_X differs"
            assert got_y.tobytes() == y.tobytes(), f"request {seed}: OUT_Y differs"
    finally:
        client.close()


def _raw_http_request(server, x: np.ndarray, y: np.ndarray):  # noqa: ANN001, ANN201
    """A connected socket that has sent a binary infer request for (x, y) and read nothing."""
    header = (b'{"inputs":[{"name":"IN_X","shape":[%d],"datatype":"UINT8","parameters":{"binary_data_size":%d}},'
              b'{"name":"IN_Y","shape":[%d],"datatype":"FP32","parameters":{"binary_data_size":%d}}],'
              b'"outputs":[{"name":"OUT_X","parameters":{"binary_data":true}},'
              b'{"name":"OUT_Y","parameters":{"binary_data":true}}]}') % (x.size, x.nbytes, y.size, y.nbytes)
    body = header + x.tobytes() + y.tobytes()
    host, port = server.http_url.split(":")
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.sendall(b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                 b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(header), len(body))
                 + body)
    return sock


def test_clients_that_leave_in_the_middle_of_their_answers(server):
    """Clients close with most of a 20 MiB answer unsent: the server drops it and answers the next clients."""
    x, y = _tensors(9, 20 * MIB)
    for _ in range(3):
        with _raw_http_request(server, x, y) as sock:
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    try:
        for seed in range(3):
            x, y = _tensors(20 + seed, 20 * MIB)
            got_x, got_y = _http_infer(client, x, y)
            assert got_x.tobytes() == x.tobytes() and got_y.tobytes() == y.tobytes()
    finally:
        client.close()


def test_a_client_that_reads_slowly_still_gets_every_byte(server):
    """The answer waits in the writer's queue while the client is not reading; the server answers others."""
    x, y = _tensors(7, 20 * MIB)
    with _raw_http_request(server, x, y) as sock:
        # Not reading yet: the answer is held by the server. Another client is served meanwhile.
        other = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
        try:
            small_x, small_y = _tensors(8, 1000)
            got_x, _ = _http_infer(other, small_x, small_y)
            assert got_x.tobytes() == small_x.tobytes()
        finally:
            other.close()
        received = bytearray()
        while b"\r\n\r\n" not in received:
            received += sock.recv(65536)
        head, _, rest = bytes(received).partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        answer = bytearray(rest)
        while len(answer) < length:
            chunk = sock.recv(1 << 20)
            assert chunk, "the connection closed before the whole answer arrived"
            answer += chunk
    json_length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"inference-header-content-length"))
    assert bytes(answer[json_length:]) == x.tobytes() + y.tobytes()
