"""Large messages received straight into server-owned shared memory (issue 21): byte-exact round trips through
tritonclient over gRPC (unary and stream) and HTTP (binary), the segment's reuse only once every request that refers
to it has ended, and its release on every way a request ends (validation error, deadline, worker killed, a client
that goes away mid-message, a gRPC stream reset mid-message). The session fixture checks that /dev/shm is clean
after the servers stop.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._support.serving import serve
from tests._support.waits import wait_until
from tests.e2e.received import (
    IDENTITY,
    MIB,
    MODEL,
    GatedInfer,
    grpc_inputs,
    payload,
    receive_segments,
    warm,
)
from tests.frontend.grpc.raw_h2 import (
    CANCEL,
    S_INITIAL_WINDOW_SIZE,
    S_MAX_FRAME_SIZE,
    RawH2,
    grpc_message,
    rst_stream,
    window_update,
)


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:gated_identity", *IDENTITY) as process:
        yield process


def _grpc_check(client, seed: int, **kwargs) -> None:
    x, y = payload(seed)
    result = client.infer(MODEL, grpc_inputs(x, y), **kwargs)
    assert result.as_numpy("OUT_X").tobytes() == x.tobytes(), f"request {seed}: OUT_X differs"
    assert result.as_numpy("OUT_Y").tobytes() == y.tobytes(), f"request {seed}: OUT_Y differs"


@pytest.fixture
def grpc(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    yield client
    client.close()
    wait_until(lambda: not receive_segments(server), "the closed connection's segments to be unlinked")


def test_grpc_unary_round_trips_in_a_segment_that_goes_with_the_connection(server, grpc):
    for seed in range(4):  # the first arrives in ordinary memory; the next ones in a segment, reused
        _grpc_check(grpc, seed)
    assert len(receive_segments(server)) == 1


def test_grpc_stream_round_trips(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        for seed in range(20, 24):
            x, y = payload(seed)
            client.async_stream_infer(MODEL, grpc_inputs(x, y))
            result, error = results.get(timeout=60)
            assert error is None, error
            assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
            assert result.as_numpy("OUT_Y").tobytes() == y.tobytes()
        # (the stream's handler still holds the previous request when the next arrives: two segments alternate)
        assert 1 <= len(receive_segments(server)) <= 2
    finally:
        client.stop_stream()
        client.close()
    wait_until(lambda: not receive_segments(server), "the stream's segments to be unlinked")


def test_http_binary_round_trips(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    try:
        for seed in range(30, 34):
            x, y = payload(seed)
            inputs = [httpclient.InferInput("IN_X", [x.size], "UINT8"), httpclient.InferInput("IN_Y", [y.size], "FP32")]
            inputs[0].set_data_from_numpy(x, binary_data=True)
            inputs[1].set_data_from_numpy(y, binary_data=True)
            outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in ("OUT_X", "OUT_Y")]
            result = client.infer(MODEL, inputs, outputs=outputs)
            assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
            assert result.as_numpy("OUT_Y").tobytes() == y.tobytes()
        assert len(receive_segments(server)) == 1
    finally:
        client.close()
    wait_until(lambda: not receive_segments(server), "the HTTP connection's segment to be unlinked")


@pytest.fixture(scope="module")
def two_instances():
    with serve("tests.models:gated_identity", *IDENTITY, "--instances", "2") as process:
        yield process


def test_a_second_request_does_not_overwrite_a_segment_the_worker_still_reads(two_instances, tmp_path: Path):
    client = grpcclient.InferenceServerClient(two_instances.grpc_url)
    try:
        for seed, name in ((40, "ww0"), (41, "ww1")):  # (messages of one size: the paths have one length)
            warm = GatedInfer(client, seed, tmp_path / name)
            warm.release()
            warm.check()  # now the connection has an idle segment of this size
        first = GatedInfer(client, 42, tmp_path / "one")
        first.started()  # the first request's segment is busy while its worker waits
        second = GatedInfer(client, 43, tmp_path / "two")
        second.started()  # the second request arrived in full and runs on the other instance
        assert len(receive_segments(two_instances)) == 2
        first.release()
        first.check()  # the model read its input after the second request arrived: not overwritten
        second.release()
        second.check()
    finally:
        client.close()
    wait_until(lambda: not receive_segments(two_instances), "the closed connection's segments to be unlinked")


def test_a_validation_error_on_a_large_message_releases_its_segment(server, grpc):
    _grpc_check(grpc, 50)
    _grpc_check(grpc, 51)
    x, y = payload(52)
    inputs = grpc_inputs(x, y)
    inputs[0] = grpcclient.InferInput("IN_Z", [x.size], "UINT8")  # (a message of the same size)
    inputs[0].set_data_from_numpy(x)
    with pytest.raises(InferenceServerException, match="IN_Z"):
        grpc.infer(MODEL, inputs)
    assert len(receive_segments(server)) == 1
    _grpc_check(grpc, 53)  # the segment was given back: reused, not a second one
    assert len(receive_segments(server)) == 1


def test_a_deadline_while_the_worker_holds_the_segment(server, grpc, tmp_path: Path):
    warm(grpc, tmp_path)
    late = GatedInfer(grpc, 62, tmp_path / "ll", timeout=1.0)
    late.started()  # it holds the connection's segment
    result, error = late._answers.get(timeout=60)
    assert result is None and "Deadline" in str(error)
    late.release()
    # A small request queues behind the abandoned one on the one instance: once it is answered, the server has seen
    # the abandoned request end (without this, the next large message could arrive first and take a second segment).
    small_x, small_y = payload(63, 16)
    grpc.infer(MODEL, grpc_inputs(small_x, small_y))
    warm(grpc, tmp_path, ("w2", "w3"))  # the segment was given back once the worker let go of it
    assert len(receive_segments(server)) == 1


def test_worker_killed_while_holding_a_segment(server, grpc, tmp_path: Path):
    warm(grpc, tmp_path)
    pids = server.worker_pids()
    request = GatedInfer(grpc, 72, tmp_path / "kk")
    request.started()  # it holds the connection's segment
    os.kill(pids[-1], signal.SIGKILL)
    result, error = request._answers.get(timeout=60)
    assert result is None and error is not None
    wait_until(lambda: len(server.worker_pids()) > len(pids) and grpc.is_model_ready(MODEL), "a new worker", 60)
    request.release()
    warm(grpc, tmp_path, ("w2", "w3"))
    assert len(receive_segments(server)) == 1  # the killed request's segment was given back and reused


def test_http_client_that_leaves_mid_body(server):
    x, y = payload(80, 4 * MIB)
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
        assert len(receive_segments(server)) == 1
        sock.sendall(head + body[: len(body) // 2])  # then half of one, and away
    wait_until(lambda: not receive_segments(server), "the segment of a client that left mid-body to be unlinked")
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
    fields = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:])
    length = int({key.lower(): value for key, value in fields.items()}[b"content-length"])
    while len(rest) < length:
        rest += sock.recv(1 << 20)


def _infer_message(x: np.ndarray, y: np.ndarray) -> bytes:
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=MODEL)
    for name, datatype, array in (("IN_X", "UINT8", x), ("IN_Y", "FP32", y)):
        tensor = request.inputs.add()
        tensor.name, tensor.datatype = name, datatype
        tensor.shape.append(array.size)
        request.raw_input_contents.append(array.tobytes())
    return grpc_message(request.SerializeToString())


def test_grpc_stream_reset_mid_message(server):
    from tritonclient.grpc import service_pb2

    def send(h2: RawH2, stream_id: int, message: bytes, end: bool = True) -> None:
        h2.headers(stream_id, h2.grpc_request("ModelInfer"), end_stream=False)
        for start in range(0, len(message), 1 << 20):
            h2.data(stream_id, message[start : start + (1 << 20)], end_stream=end and start + (1 << 20) >= len(message))

    def check(h2: RawH2, stream_id: int, x: np.ndarray) -> None:
        _, data, trailers = h2.answer(stream_id)
        assert trailers.get("grpc-status") == "0", trailers
        answer = service_pb2.ModelInferResponse.FromString(data[5:])
        assert answer.raw_output_contents[[o.name for o in answer.outputs].index("OUT_X")] == x.tobytes()

    port = int(server.grpc_url.split(":")[1])
    with RawH2(port, timeout_s=60) as h2:
        h2.handshake((S_MAX_FRAME_SIZE, 1 << 20), (S_INITIAL_WINDOW_SIZE, 1 << 30))
        h2.send(window_update(0, 1 << 30))  # (the answers come back whole)
        for stream_id, seed in ((1, 100), (3, 101)):  # the second message of this size goes into a segment
            x, y = payload(seed, 3 * MIB)
            send(h2, stream_id, _infer_message(x, y))
            check(h2, stream_id, x)
        assert len(receive_segments(server)) == 1
        x, y = payload(102, 3 * MIB)
        message = _infer_message(x, y)
        send(h2, 5, message[: len(message) // 2], end=False)  # half of a message into the segment, then a reset
        h2.send(rst_stream(5, CANCEL))
        x, y = payload(103, 3 * MIB)
        send(h2, 7, _infer_message(x, y))
        check(h2, 7, x)
        assert len(receive_segments(server)) == 1  # the reset stream's segment was free again, and reused
    wait_until(lambda: not receive_segments(server), "the connection's segment to be unlinked")


def test_response_cache_hits_and_a_python_model_on_received_segments():
    from tests._support.paths import REPO

    repository = REPO / "tests" / "repositories" / "cache"
    with serve("--model-repository", str(repository), "--cache-config", "local,size=33554432") as cached:
        client = grpcclient.InferenceServerClient(cached.grpc_url)
        try:
            def infer(x: np.ndarray) -> tuple[np.ndarray, int]:
                tensor = grpcclient.InferInput("X", [x.size], "FP32")
                tensor.set_data_from_numpy(x)
                result = client.infer("counted", [tensor])
                return result.as_numpy("Y"), int(result.as_numpy("CALLS")[0])

            x = np.random.default_rng(110).random(MIB, dtype=np.float32)
            for _ in range(4):  # computed once (the first in ordinary memory), then cache hits from the segment
                y, calls = infer(x)
                assert y.tobytes() == (2 * x).tobytes() and calls == 1
            other = np.random.default_rng(111).random(MIB, dtype=np.float32)
            y, calls = infer(other)  # the Python model reads it from the segment the hits gave back
            assert y.tobytes() == (2 * other).tobytes() and calls == 2
            assert len(receive_segments(cached)) == 1
        finally:
            client.close()
        wait_until(lambda: not receive_segments(cached), "the connection's segment to be unlinked")
