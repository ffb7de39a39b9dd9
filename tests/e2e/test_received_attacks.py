"""Attacks on large messages received into server-owned shared memory (issue 21), as a hostile or careless client
would make them: tensors the model must get aligned for their dtype, messages of exactly the receive threshold and one
byte either side, DATA frames that end inside a tensor, gzip-compressed messages, calls reset while their worker reads,
many connections stalled inside a message, requests refused or failed (HTTP ones: test_received_attacks_http.py).
Every answer is compared byte for byte; the session fixture checks /dev/shm after the servers stop.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from pytriton.core.received import RECEIVE_MIN
from tests._support.serving import serve, tensor_args
from tests._support.waits import wait_until
from tests.e2e.received import (
    IDENTITY,
    MIB,
    MODEL,
    GatedInfer,
    digest,
    grpc_inputs,
    payload,
    receive_segments,
    warm,
)
from tests.frontend.grpc.raw_h2 import (
    CANCEL,
    DATA,
    END_STREAM,
    HEADERS,
    RST_STREAM,
    S_INITIAL_WINDOW_SIZE,
    S_MAX_FRAME_SIZE,
    RawH2,
    grpc_message,
    ping,
    rst_stream,
    window_update,
)

PROBE = ["--max-batch-size", "0"] + tensor_args("input", [("IN_X", "fp32", "-1")]) \
    + tensor_args("output", [("OUT_X", "fp32", "-1"), ("ALIGNED", "bool", "1"), ("RECEIVED", "bool", "1")])


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:gated_identity", *IDENTITY) as process:
        yield process


@pytest.fixture(scope="module")
def probe():
    with serve("tests.models:alignment_probe", *PROBE) as process:
        yield process


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_fp32_tensors_received_into_a_segment_reach_the_model_aligned(probe, protocol: str):
    """Where a tensor lies in a message depends on the header before it (here: the request id's length); the model
    still gets arrays aligned for their dtype, as when they travel in the request arena. Over HTTP, whose JSON
    header's length is known before the body arrives, the body is placed so that they are aligned in the segment; over
    gRPC, a tensor found unaligned is copied, and the next message of that size is placed so that it lies aligned:
    from then on the model gets them from the segment whatever that length."""
    x = np.random.default_rng(1).random(MIB // 4, dtype=np.float32)
    if protocol == "grpc":
        client = grpcclient.InferenceServerClient(probe.grpc_url)
        tensor = grpcclient.InferInput("IN_X", [x.size], "FP32")
        tensor.set_data_from_numpy(x)
        outputs = None
    else:
        client = httpclient.InferenceServerClient(probe.http_url, network_timeout=60)
        tensor = httpclient.InferInput("IN_X", [x.size], "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in ("OUT_X", "ALIGNED", "RECEIVED")]
    try:
        received = []
        for shift in range(8):  # (each message size three times: the second goes into a segment, the third placed)
            for repeat in range(3):
                result = client.infer("alignment_probe", [tensor], request_id="r" * (shift + 1), outputs=outputs)
                assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
                assert result.as_numpy("ALIGNED")[0], f"an unaligned FP32 input (request id of {shift + 1} bytes)"
                if repeat == 2:
                    received.append(bool(result.as_numpy("RECEIVED")[0]))
        assert received == [True] * 8, received
        assert receive_segments(probe)  # (the messages did go into segments)
    finally:
        client.close()
    wait_until(lambda: not receive_segments(probe), "the connection's segments to be unlinked")


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
        assert len(receive_segments(server)) == (0 if delta < 0 else 1)
    wait_until(lambda: not receive_segments(server), "the connection's segments to be unlinked")


def test_data_frames_that_end_inside_a_tensor(server):
    """The message arrives in frames of odd sizes, the first ones ending inside the protobuf header, inside a tensor's
    length prefix and inside the tensor itself; into a segment (from the second message) as into ordinary memory."""
    with _h2(server) as h2:
        for i in range(3):
            x, message = _sized(3 * MIB, 40 + i)
            _infer(h2, 2 * i + 1, message, x, chunks=[3, 17, 29, 1, 7777, 65536 + 13, 300_001])
        assert len(receive_segments(server)) == 1
    wait_until(lambda: not receive_segments(server), "the connection's segments to be unlinked")


def test_gzip_compressed_large_messages(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        for seed in range(50, 54):
            x, y = payload(seed, 2 * MIB)
            result = client.infer(MODEL, grpc_inputs(x, y), compression_algorithm="gzip")
            assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
            assert result.as_numpy("OUT_Y").tobytes() == y.tobytes()
        x, y = payload(54, 2 * MIB)  # then the same uncompressed
        result = client.infer(MODEL, grpc_inputs(x, y))
        assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
    finally:
        client.close()
    wait_until(lambda: not receive_segments(server), "the connection's segments to be unlinked")


@pytest.fixture(scope="module")
def digest_server():
    # (one execution per instance: a call sent while both are held waits in the server's queue, not in a worker's
    # socket, where withdrawing it would race the CANCEL message to the worker)
    with serve("tests.models:gated_digest", *IDENTITY, "--instances", "2", env={"PYTRITON_PIPELINE_DEPTH": "1"}) \
            as process:
        yield process


def _gated_message(x: np.ndarray, base: Path, release: bool = False) -> bytes:
    """A ModelInferRequest for gated_digest: the model creates `<base>.started`, waits for `<base>.release` (made
    now when `release`), then writes IN_X's sha256 to `<base>.digest`."""
    from tritonclient.grpc import service_pb2

    if release:
        Path(f"{base}.release").touch()
    request = service_pb2.ModelInferRequest(model_name="gated_digest")
    for name, value in (("started", f"{base}.started"), ("release", f"{base}.release"), ("digest", f"{base}.digest")):
        request.parameters[name].string_param = value
    for name, datatype, array in (("IN_X", "UINT8", x), ("IN_Y", "FP32", np.arange(4, dtype=np.float32))):
        tensor = request.inputs.add()
        tensor.name, tensor.datatype = name, datatype
        tensor.shape.append(array.size)
        request.raw_input_contents.append(array.tobytes())
    return request.SerializeToString()


def _send(h2: RawH2, stream_id: int, message: bytes) -> None:
    h2.headers(stream_id, h2.grpc_request("ModelInfer"), end_stream=False)
    wire = grpc_message(message)
    for pos in range(0, len(wire), MIB):
        h2.data(stream_id, wire[pos : pos + MIB], end_stream=pos + MIB >= len(wire))


@pytest.mark.parametrize("queued", [False, True], ids=["while-the-worker-reads", "while-queued"])
def test_a_reset_call_keeps_its_bytes_until_the_worker_has_read_them(digest_server, tmp_path: Path, queued: bool):
    """A call reset (RST_STREAM) while its worker holds it (or while it waits for one), then more messages of the same
    size on the same connection: the model of the reset call reads the bytes that call sent, not a later message's."""
    from tritonclient.grpc import service_pb2

    def check(*calls: tuple[int, np.ndarray]) -> None:
        """The answers of these streams, in whatever order they come."""
        data: dict[int, list[bytes]] = {stream_id: [] for stream_id, _ in calls}
        trailers: dict[int, dict] = {}
        while len(trailers) < len(calls):
            item = h2.wait_for(lambda f: f.stream_id in data and f.type in (DATA, HEADERS, RST_STREAM), "answers")
            assert item.type != RST_STREAM, f"{item} instead of an answer"
            if item.type == DATA:
                data[item.stream_id].append(item.payload)
            else:
                decoded = dict(h2.decoder.decode(item.payload))
                if item.flags & END_STREAM:
                    trailers[item.stream_id] = decoded
        for stream_id, x in calls:
            assert trailers[stream_id].get("grpc-status") == "0", trailers[stream_id]
            answer = service_pb2.ModelInferResponse.FromString(b"".join(data[stream_id])[5:])
            assert answer.raw_output_contents[0] == x.tobytes(), f"stream {stream_id}: OUT_X differs"

    xs = [np.random.default_rng(200 + i).integers(0, 256, 2 * MIB, dtype=np.uint8) for i in range(6)]
    with _h2(digest_server) as h2:
        for stream_id, i in ((1, 0), (3, 1)):  # the connection gets a segment of this size
            _send(h2, stream_id, _gated_message(xs[i], tmp_path / f"m{i}", release=True))
            check((stream_id, xs[i]))
        assert len(receive_segments(digest_server)) == 1
        held = []
        for stream_id, i in ((5, 2), (7, 3)) if queued else ((5, 2),):  # (queued: both instances held first)
            _send(h2, stream_id, _gated_message(xs[i], tmp_path / f"m{i}"))
            wait_until(Path(f"{tmp_path / f'm{i}'}.started").exists, "the worker to hold the request")
            held.append((stream_id, i))
        victim = 4 if queued else 2
        if queued:
            _send(h2, 9, _gated_message(xs[4], tmp_path / "m4"))  # waits for an instance
        h2.send(rst_stream(9 if queued else 5, CANCEL))
        # The server acts on frames in their order, a reset at once: once it acknowledges a PING sent after the reset,
        # the call is withdrawn. Only then are the held calls released (before, an instance set free before the server
        # had read the reset could take the call and run it: it was no longer waiting when it was reset).
        h2.send(ping(b"resetted"))
        h2.expect_ping_ack(b"resetted")
        _send(h2, 11, _gated_message(xs[5], tmp_path / "m5", release=not queued))  # the same size
        if not queued:
            check((11, xs[5]))
        for _, i in held:
            Path(f"{tmp_path / f'm{i}'}.release").touch()
        if queued:
            Path(f"{tmp_path / 'm4'}.release").touch()
            Path(f"{tmp_path / 'm5'}.release").touch()
            check(*[(stream_id, xs[i]) for stream_id, i in held], (11, xs[5]))
            assert not Path(f"{tmp_path / 'm4'}.started").exists(), "a call reset while queued ran"
        else:
            assert digest(tmp_path / f"m{victim}") == hashlib.sha256(xs[victim].tobytes()).hexdigest(), \
                "the model of the reset call read bytes a later message overwrote"
            assert digest(tmp_path / "m5") == hashlib.sha256(xs[5].tobytes()).hexdigest()
    wait_until(lambda: not receive_segments(digest_server), "the connection's segments to be unlinked")


def _unknown_model_message(nbytes: int) -> bytes:
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name="no_such_model")
    tensor = request.inputs.add()
    tensor.name, tensor.datatype = "IN_X", "UINT8"
    tensor.shape.append(nbytes)
    request.raw_input_contents.append(bytes(nbytes))
    return grpc_message(request.SerializeToString())


def test_many_connections_stalled_inside_a_repeated_size_stay_within_the_server_wide_bound(server):
    """72 connections each send a whole 16 MiB message (to an unknown model: answered NOT_FOUND), then half of a
    second of that size, and stall: the second ones may go into segments, but never more than 1 GiB of them in all;
    the server still answers; when the clients go, every segment goes."""
    from pytriton.core.received import RECEIVE_TOTAL_MAX

    wire = _unknown_model_message(16 * MIB)
    connections = []
    try:
        for _ in range(72):
            h2 = _h2(server)
            connections.append(h2)
            for stream_id, part in ((1, wire), (3, wire[: len(wire) // 2])):
                h2.headers(stream_id, h2.grpc_request("ModelInfer"), end_stream=False)
                for pos in range(0, len(part), MIB):
                    h2.data(stream_id, part[pos : pos + MIB], end_stream=part is wire and pos + MIB >= len(part))
            _, _, trailers = h2.answer(1)
            assert trailers.get("grpc-status") == "5", trailers  # NOT_FOUND
        # (the half messages have arrived once the server answers a ping on each connection: frames are in order)
        for h2 in connections:
            h2.send(ping(b"stalled!"))
            h2.expect_ping_ack(b"stalled!")
        segments = receive_segments(server)
        held = sum(os.stat(f"/dev/shm/{name}").st_size for name in segments)
        assert segments and held <= RECEIVE_TOTAL_MAX, f"{len(segments)} segments, {held} bytes"
        _grpc_round_trip(server)  # the server still answers (into ordinary memory past the bound)
    finally:
        for h2 in connections:
            h2.close()
    wait_until(lambda: not receive_segments(server), "the stalled connections' segments to be unlinked")


def _grpc_round_trip(server) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        x, y = payload(300, 2 * MIB)
        for _ in range(2):
            result = client.infer(MODEL, grpc_inputs(x, y))
            assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
    finally:
        client.close()


@pytest.mark.parametrize("mistake", ["unknown model", "unknown version", "wrong datatype", "wrong shape"])
def test_requests_refused_before_any_worker_give_their_segment_back(server, mistake: str):
    """Messages of one size that the server refuses (answered with an error, no worker involved), then good ones of
    that size: the refused ones let go of the connection's segment at once (one segment, reused throughout)."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        x, y = payload(400, 1536 * 1024)  # (as INT32: a shape whose varint has the same length)
        good: dict = {"model_name": MODEL, "model_version": "1" if mistake == "unknown version" else ""}
        for i in range(5):
            inputs = grpc_inputs(x, y)
            model, version = MODEL, good["model_version"]
            if mistake == "unknown model":
                model = "gated_identitY"
            elif mistake == "unknown version":
                version = "7"
            elif mistake == "wrong datatype":
                inputs[0] = grpcclient.InferInput("IN_X", [x.size // 4], "INT32")
                inputs[0].set_data_from_numpy(x.view(np.int32))
            else:
                inputs[0] = grpcclient.InferInput("IN_X", [2, x.size // 2], "UINT8")
                inputs[0].set_data_from_numpy(x.reshape(2, -1))
            with pytest.raises(InferenceServerException):
                client.infer(model, inputs, model_version=version)
            assert len(receive_segments(server)) <= 1, f"after refused request {i}"
        assert len(receive_segments(server)) == 1
        for _ in range(3):
            result = client.infer(MODEL, grpc_inputs(x, y), model_version=good["model_version"])
            assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
        if mistake != "wrong shape":  # (a shape of two dimensions: a longer message)
            assert len(receive_segments(server)) == 1
    finally:
        client.close()
    wait_until(lambda: not receive_segments(server), "the connection's segment to be unlinked")


@pytest.mark.parametrize("outcome", ["raise", "wrong output"])
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_requests_that_fail_in_the_model_give_their_segment_back(digest_server, protocol: str, outcome: str):
    """Large requests of one size whose model fails (raises, or answers an output of the wrong datatype) on one
    connection: each gives the connection's segment back when it ends (one segment throughout, not one per error
    until the garbage collector runs); then good requests of that size still round-trip in it."""
    x, y = payload(500, 2 * MIB)
    if protocol == "grpc":
        client = grpcclient.InferenceServerClient(digest_server.grpc_url)

        def infer(parameters: dict):
            result = client.infer("gated_digest", grpc_inputs(x, y), parameters=parameters)
            return result.as_numpy("OUT_X")
    else:
        client = httpclient.InferenceServerClient(digest_server.http_url, network_timeout=60)

        def infer(parameters: dict):
            inputs = [httpclient.InferInput("IN_X", [x.size], "UINT8"), httpclient.InferInput("IN_Y", [y.size], "FP32")]
            inputs[0].set_data_from_numpy(x, binary_data=True)
            inputs[1].set_data_from_numpy(y, binary_data=True)
            outputs = [httpclient.InferRequestedOutput("OUT_X", binary_data=True)]
            return client.infer("gated_digest", inputs, outputs=outputs, parameters=parameters).as_numpy("OUT_X")
    try:
        for i in range(5):  # (the parameter values have one length: the messages have one size)
            with pytest.raises(InferenceServerException):
                infer({"outcome": outcome})
            assert len(receive_segments(digest_server)) <= 1, f"after failed request {i}"
        for _ in range(2):
            assert infer({"outcome": "x" * len(outcome)}).tobytes() == x.tobytes()
        assert len(receive_segments(digest_server)) == 1
    finally:
        client.close()
    wait_until(lambda: not receive_segments(digest_server), "the connection's segment to be unlinked")


def _worker_receive_mappings(server) -> list[str]:
    """The receive segments the server's workers still have mapped (unlinked ones show as "(deleted)")."""
    found = []
    for pid in server.worker_pids():
        try:
            with open(f"/proc/{pid}/maps") as maps:
                found += [line.split(None, 5)[5].strip() for line in maps if "_rcv" in line]
        except (FileNotFoundError, ProcessLookupError):
            pass
    return found


def test_workers_let_go_of_the_segments_of_closed_connections(server):
    """Connections come and go, each with a segment its requests were read from: once they are gone, no worker keeps
    one mapped (an unlinked segment still mapped would keep its memory in /dev/shm)."""
    for seed in range(8):
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            x, y = payload(800 + seed, MIB + 4096 * seed)  # (a size of its own)
            for _ in range(3):
                result = client.infer(MODEL, grpc_inputs(x, y))
                assert result.as_numpy("OUT_X").tobytes() == x.tobytes()
            assert _worker_receive_mappings(server)  # (the worker read the tensor from the segment)
        finally:
            client.close()
    wait_until(lambda: not receive_segments(server), "the connections' segments to be unlinked")
    wait_until(lambda: not _worker_receive_mappings(server), "the workers to unmap the segments")


def test_a_deadline_while_queued_gives_the_segment_back_and_the_call_never_runs(server, tmp_path: Path):
    """One instance, held by a request; a second of the same size waits for it and passes its deadline: the model never
    sees the second, and its segment is free again (more requests of that size reuse the segments there are)."""
    
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        warm(client, tmp_path)  # an idle segment of this size
        first = GatedInfer(client, 91, tmp_path / "q1")
        first.started()
        late = GatedInfer(client, 92, tmp_path / "q2", timeout=1.0)
        result, error = late._answers.get(timeout=60)
        assert result is None and "Deadline" in str(error)
        third = GatedInfer(client, 93, tmp_path / "q3")  # (the reset may still be on its way: maybe a new one)
        Path(f"{tmp_path / 'q3'}.release").touch()
        first.release()
        first.check()
        third.check()
        assert not Path(f"{tmp_path / 'q2'}.started").exists(), "a call past its deadline while queued ran"
        held = len(receive_segments(server))
        assert held <= 3
        warm(client, tmp_path, ("w4", "w5"))
        assert len(receive_segments(server)) == held  # all of them idle again: reused
    finally:
        client.close()
    wait_until(lambda: not receive_segments(server), "the connection's segments to be unlinked")


def test_declared_huge_messages_that_stall_get_no_segment(server):
    """200 connections each declare a message of 2 GiB - 1 (the largest allowed), send 300 KiB of it and stall: no
    segment is made for a size that never arrived in full, the server's memory grows with the bytes received only,
    and it still answers; the connections' buffers go with them."""
    from tests._support.rss import rss_bytes

    before = rss_bytes(server.process.pid)
    declared = b"\x00" + (2**31 - 1).to_bytes(4, "big")
    connections = []
    try:
        for _ in range(200):
            h2 = RawH2(int(server.grpc_url.split(":")[1]), timeout_s=60)
            connections.append(h2)
            h2.handshake((S_MAX_FRAME_SIZE, 1 << 20))
            h2.headers(1, h2.grpc_request("ModelInfer"), end_stream=False)
            h2.data(1, declared + bytes(300 * 1024), end_stream=False)
        for h2 in connections:  # (frames are read in order: the 300 KiB have arrived once the PING is answered)
            h2.send(ping(b"stalled!"))
            h2.expect_ping_ack(b"stalled!")
        assert not receive_segments(server)
        grown = rss_bytes(server.process.pid) - before
        assert grown < 200 * 2 * 300 * 1024 + (64 << 20), f"the server grew by {grown >> 20} MiB"
        _grpc_round_trip(server)
    finally:
        for h2 in connections:
            h2.close()
    wait_until(lambda: not receive_segments(server), "the segments of the round trip to be unlinked")
