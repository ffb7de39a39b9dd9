"""Attacks on large messages received into server-owned shared memory (issue 21), as a hostile or careless client
would make them: tensors the model must get aligned for their dtype, messages of exactly the receive threshold and one
byte either side, DATA frames that end inside a tensor, gzip-compressed messages, HTTP keep-alive alternating large and
small bodies. Every answer is compared byte for byte; the session fixture checks /dev/shm after the servers stop.
"""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from pytriton.core.received import RECEIVE_MIN
from tests.conftest import serve, tensor_args
from tests.e2e.test_received_segments import MODEL, _data, _grpc_inputs, _receive_segments, _wait
from tests.frontend.grpc.raw_h2 import S_INITIAL_WINDOW_SIZE, S_MAX_FRAME_SIZE, RawH2, grpc_message, window_update

MIB = 1 << 20
IDENTITY = ["--max-batch-size", "0"] + tensor_args("input", [("IN_X", "uint8", "-1"), ("IN_Y", "fp32", "-1")]) \
    + tensor_args("output", [("OUT_X", "uint8", "-1"), ("OUT_Y", "fp32", "-1")])
PROBE = ["--max-batch-size", "0"] + tensor_args("input", [("IN_X", "fp32", "-1")]) \
    + tensor_args("output", [("OUT_X", "fp32", "-1"), ("ALIGNED", "bool", "1")])


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:gated_identity", *IDENTITY) as process:
        yield process


@pytest.fixture(scope="module")
def probe():
    with serve("tests.models:alignment_probe", *PROBE) as process:
        yield process


def test_fp32_tensors_received_into_a_segment_reach_the_model_aligned(probe):
    """Where a tensor lies in a message depends on the header before it (here: the request id's length); the model
    still gets arrays aligned for their dtype, as when they travel in the request arena."""
    client = grpcclient.InferenceServerClient(probe.grpc_url)
    try:
        x = np.random.default_rng(1).random(MIB // 4, dtype=np.float32)
        for shift in range(4):  # (each message size twice: the second goes into a segment)
            for _ in range(2):
                tensor = grpcclient.InferInput("IN_X", [x.size], "FP32")
                tensor.set_data_from_numpy(x)
                result = client.infer("alignment_probe", [tensor], request_id="r" * (shift + 1))
                assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
                assert result.as_numpy("ALIGNED")[0], f"an unaligned FP32 input (request id of {shift + 1} bytes)"
        assert _receive_segments(probe)  # (the messages did go into segments)
    finally:
        client.close()
    _wait(lambda: not _receive_segments(probe), "the connection's segments to be unlinked")


def _message(x: np.ndarray, y: np.ndarray) -> bytes:
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=MODEL)
    for name, datatype, array in (("IN_X", "UINT8", x), ("IN_Y", "FP32", y)):
        tensor = request.inputs.add()
        tensor.name, tensor.datatype = name, datatype
        tensor.shape.append(array.size)
        request.raw_input_contents.append(array.tobytes())
    return request.SerializeToString()


def _sized(length: int, seed: int) -> tuple[np.ndarray, bytes]:
    """IN_X and a ModelInferRequest of exactly `length` bytes."""
    y = np.arange(4, dtype=np.float32)
    n = length - (len(_message(np.zeros(length, np.uint8), y)) - length)
    x = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)
    message = _message(x, y)
    assert len(message) == length
    return x, message


def _h2(server) -> RawH2:
    h2 = RawH2(int(server.grpc_url.split(":")[1]), timeout_s=60)
    h2.handshake((S_MAX_FRAME_SIZE, 1 << 20), (S_INITIAL_WINDOW_SIZE, 1 << 30))
    h2.send(window_update(0, 1 << 30))
    return h2


def _infer(h2: RawH2, stream_id: int, message: bytes, x: np.ndarray, chunks: list[int] | None = None) -> None:
    """Send `message` on `stream_id` in DATA frames of the sizes `chunks` (then 1 MiB ones) and check OUT_X."""
    from tritonclient.grpc import service_pb2

    h2.headers(stream_id, h2.grpc_request("ModelInfer"), end_stream=False)
    wire = grpc_message(message)
    pos = 0
    for size in chunks or []:
        h2.data(stream_id, wire[pos : pos + size], end_stream=False)
        pos += size
    while pos < len(wire):
        h2.data(stream_id, wire[pos : pos + MIB], end_stream=pos + MIB >= len(wire))
        pos += MIB
    _, data, trailers = h2.answer(stream_id)
    assert trailers.get("grpc-status") == "0", trailers
    answer = service_pb2.ModelInferResponse.FromString(data[5:])
    out = answer.raw_output_contents[[o.name for o in answer.outputs].index("OUT_X")]
    assert out == x.tobytes(), f"stream {stream_id}: OUT_X differs"


@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_messages_at_the_receive_threshold(server, delta: int):
    length = RECEIVE_MIN + delta
    with _h2(server) as h2:
        for i in range(4):
            x, message = _sized(length, 10 * (delta + 2) + i)
            _infer(h2, 2 * i + 1, message, x)
        # a message under the threshold never goes into a segment; one at it or above does (from the second on)
        assert len(_receive_segments(server)) == (0 if delta < 0 else 1)
    _wait(lambda: not _receive_segments(server), "the connection's segments to be unlinked")


def test_data_frames_that_end_inside_a_tensor(server):
    """The message arrives in frames of odd sizes, the first ones ending inside the protobuf header, inside a tensor's
    length prefix and inside the tensor itself; into a segment (from the second message) as into ordinary memory."""
    with _h2(server) as h2:
        for i in range(3):
            x, message = _sized(3 * MIB, 40 + i)
            _infer(h2, 2 * i + 1, message, x, chunks=[3, 17, 29, 1, 7777, 65536 + 13, 300_001])
        assert len(_receive_segments(server)) == 1
    _wait(lambda: not _receive_segments(server), "the connection's segments to be unlinked")


def test_gzip_compressed_large_messages(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        for seed in range(50, 54):
            x, y = _data(seed, 2 * MIB)
            result = client.infer(MODEL, _grpc_inputs(x, y), compression_algorithm="gzip")
            assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
            assert result.as_numpy("OUT_Y").tobytes() == y.tobytes()
        x, y = _data(54, 2 * MIB)  # then the same uncompressed
        result = client.infer(MODEL, _grpc_inputs(x, y))
        assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
    finally:
        client.close()
    _wait(lambda: not _receive_segments(server), "the connection's segments to be unlinked")


def test_http_keep_alive_large_small_large(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    try:
        for seed in range(60, 68):
            x, y = _data(seed, 2 * MIB if seed % 2 == 0 else 1000)
            inputs = [httpclient.InferInput("IN_X", [x.size], "UINT8"), httpclient.InferInput("IN_Y", [y.size], "FP32")]
            inputs[0].set_data_from_numpy(x, binary_data=True)
            inputs[1].set_data_from_numpy(y, binary_data=True)
            outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in ("OUT_X", "OUT_Y")]
            result = client.infer(MODEL, inputs, outputs=outputs)
            assert result.as_numpy("OUT_X").tobytes() == x.tobytes(), f"request {seed}"
            assert result.as_numpy("OUT_Y").tobytes() == y.tobytes(), f"request {seed}"
        assert len(_receive_segments(server)) == 1
    finally:
        client.close()
    _wait(lambda: not _receive_segments(server), "the HTTP connection's segment to be unlinked")
