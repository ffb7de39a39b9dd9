"""Large messages received straight into server-owned shared memory (issue 21): byte-exact round trips through
tritonclient over gRPC (unary and stream) and HTTP (binary), the segment's reuse only once every request that refers
to it has ended, and its release on every way a request ends (validation error, deadline, worker killed, a client
that goes away mid-message). The session fixture checks that /dev/shm is clean after the servers stop.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.conftest import serve, tensor_args

MIB = 1 << 20
SIZE = 20 * MIB
MODEL = "gated_identity"
IDENTITY = ["--max-batch-size", "0"] + tensor_args("input", [("IN_X", "uint8", "-1"), ("IN_Y", "fp32", "-1")]) \
    + tensor_args("output", [("OUT_X", "uint8", "-1"), ("OUT_Y", "fp32", "-1")])


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:gated_identity", *IDENTITY) as process:
        yield process


def _receive_segments(server) -> list[str]:
    """The server's receive segments in /dev/shm (named pytriton_<tag>_<server pid>_rcv<id>)."""
    marker = f"_{server.process.pid}_rcv"
    return [name for name in os.listdir("/dev/shm") if name.startswith("pytriton_") and marker in name]


def _wait(condition, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _data(seed: int, nbytes: int = SIZE) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, nbytes, dtype=np.uint8), rng.random(1000, dtype=np.float32)


def _grpc_inputs(x: np.ndarray, y: np.ndarray, x_type: str = "UINT8") -> list:
    inputs = [grpcclient.InferInput("IN_X", [x.size], x_type), grpcclient.InferInput("IN_Y", [y.size], "FP32")]
    inputs[0].set_data_from_numpy(x)
    inputs[1].set_data_from_numpy(y)
    return inputs


def _grpc_check(client, seed: int, **kwargs) -> None:
    x, y = _data(seed)
    result = client.infer(MODEL, _grpc_inputs(x, y), **kwargs)
    assert result.as_numpy("OUT_X").tobytes() == x.tobytes(), f"request {seed}: OUT_X differs"
    assert result.as_numpy("OUT_Y").tobytes() == y.tobytes(), f"request {seed}: OUT_Y differs"


@pytest.fixture
def grpc(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    yield client
    client.close()
    _wait(lambda: not _receive_segments(server), "the closed connection's segments to be unlinked")


def test_grpc_unary_round_trips_in_a_segment_that_goes_with_the_connection(server, grpc):
    for seed in range(4):  # the first arrives in ordinary memory; the next ones in a segment, reused
        _grpc_check(grpc, seed)
    assert len(_receive_segments(server)) == 1


def test_grpc_stream_round_trips(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        for seed in range(20, 24):
            x, y = _data(seed)
            client.async_stream_infer(MODEL, _grpc_inputs(x, y))
            result, error = results.get(timeout=60)
            assert error is None, error
            assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
            assert result.as_numpy("OUT_Y").tobytes() == y.tobytes()
        # (the stream's handler still holds the previous request when the next arrives: two segments alternate)
        assert 1 <= len(_receive_segments(server)) <= 2
    finally:
        client.stop_stream()
        client.close()
    _wait(lambda: not _receive_segments(server), "the stream's segments to be unlinked")


def test_http_binary_round_trips(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    try:
        for seed in range(30, 34):
            x, y = _data(seed)
            inputs = [httpclient.InferInput("IN_X", [x.size], "UINT8"), httpclient.InferInput("IN_Y", [y.size], "FP32")]
            inputs[0].set_data_from_numpy(x, binary_data=True)
            inputs[1].set_data_from_numpy(y, binary_data=True)
            outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in ("OUT_X", "OUT_Y")]
            result = client.infer(MODEL, inputs, outputs=outputs)
            assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
            assert result.as_numpy("OUT_Y").tobytes() == y.tobytes()
        assert len(_receive_segments(server)) == 1
    finally:
        client.close()
    _wait(lambda: not _receive_segments(server), "the HTTP connection's segment to be unlinked")


def test_a_second_request_does_not_overwrite_a_segment_the_worker_still_reads(server, grpc, tmp_path: Path):
    _grpc_check(grpc, 40)
    _grpc_check(grpc, 41)  # now the connection has an idle segment of this size
    started, release = tmp_path / "started", tmp_path / "release"
    first_x, first_y = _data(42)
    answers: queue.Queue = queue.Queue()
    grpc.async_infer(MODEL, _grpc_inputs(first_x, first_y), lambda result, error: answers.put((result, error)),
                     parameters={"started": str(started), "release": str(release)})
    _wait(started.exists, "the worker to hold the first request")
    # the first request's segment is busy: the second goes elsewhere (and the model reads it after its wait)
    second = threading_infer(grpc, 43, release)
    release.touch()
    result, error = answers.get(timeout=60)
    assert error is None, error
    assert result.as_numpy("OUT_X").tobytes() == first_x.tobytes(), "the first request's input was overwritten"
    assert result.as_numpy("OUT_Y").tobytes() == first_y.tobytes()
    second()


def threading_infer(client, seed: int, release: Path):
    """Send a request (of the same size) on the same connection now; the returned function checks its answer."""
    x, y = _data(seed)
    answers: queue.Queue = queue.Queue()
    client.async_infer(MODEL, _grpc_inputs(x, y), lambda result, error: answers.put((result, error)),
                       parameters={"release": str(release)})

    def check() -> None:
        result, error = answers.get(timeout=60)
        assert error is None, error
        assert result.as_numpy("OUT_X").tobytes() == x.tobytes(), "the second request's input differs"

    return check


def test_a_validation_error_on_a_large_message_releases_its_segment(server, grpc):
    _grpc_check(grpc, 50)
    _grpc_check(grpc, 51)
    x, y = _data(52)
    with pytest.raises(InferenceServerException, match="IN_X"):  # the model wants UINT8
        grpc.infer(MODEL, _grpc_inputs(x.view(np.int8), y, "INT8"))
    _grpc_check(grpc, 53)  # the segment was given back: reused, not a second one
    assert len(_receive_segments(server)) == 1


def test_a_deadline_while_the_worker_holds_the_segment(server, grpc, tmp_path: Path):
    _grpc_check(grpc, 60)
    _grpc_check(grpc, 61)
    started, release = tmp_path / "started", tmp_path / "release"
    x, y = _data(62)
    with pytest.raises(InferenceServerException, match="Deadline"):
        grpc.infer(MODEL, _grpc_inputs(x, y), client_timeout=2.0,
                   parameters={"started": str(started), "release": str(release)})
    assert started.exists()
    release.touch()
    _grpc_check(grpc, 63)
    _grpc_check(grpc, 64)


def test_worker_killed_while_holding_a_segment(server, grpc, tmp_path: Path):
    _grpc_check(grpc, 70)
    _grpc_check(grpc, 71)
    started, release = tmp_path / "started", tmp_path / "release"
    x, y = _data(72)
    answers: queue.Queue = queue.Queue()
    grpc.async_infer(MODEL, _grpc_inputs(x, y), lambda result, error: answers.put((result, error)),
                     parameters={"started": str(started), "release": str(release)})
    _wait(started.exists, "the worker to hold the request")
    pids = server.worker_pids()
    os.kill(pids[-1], signal.SIGKILL)
    result, error = answers.get(timeout=60)
    assert result is None and error is not None
    _wait(lambda: len(server.worker_pids()) > len(pids) and grpc.is_model_ready(MODEL), "a new worker", 60)
    release.touch()
    _grpc_check(grpc, 73)
    _grpc_check(grpc, 74)


def test_http_client_that_leaves_mid_body(server):
    x, y = _data(80, 4 * MIB)
    header = (b'{"inputs":[{"name":"IN_X","datatype":"UINT8","shape":[%d],"parameters":{"binary_data_size":%d}},'
              b'{"name":"IN_Y","datatype":"FP32","shape":[1000],"parameters":{"binary_data_size":4000}}]}'
              % (x.size, x.size))
    body = header + x.tobytes() + y.tobytes()
    head = (b"POST /v2/models/gated_identity/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(header), len(body)))
    host, port = server.http_url.split(":")
    with socket.create_connection((host, int(port))) as sock:
        for _ in range(2):  # the second body goes into a segment
            sock.sendall(head + body)
            _read_answer(sock)
        assert len(_receive_segments(server)) == 1
        sock.sendall(head + body[: len(body) // 2])  # then half of one, and away
    _wait(lambda: not _receive_segments(server), "the segment of a client that left mid-body to be unlinked")
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        assert client.is_model_ready(MODEL)
    finally:
        client.close()


def _read_answer(sock: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, rest = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(rest) < length:
        rest += sock.recv(1 << 20)
