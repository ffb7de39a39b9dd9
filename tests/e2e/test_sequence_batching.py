"""The sequence batcher through tritonclient (gRPC unary, gRPC stream, HTTP) on repository models
(tests/repositories/sequence): control tensors as Triton delivers them, Direct and Oldest, sequences kept on their
instance, Triton's refusals, idle sequences released, a worker killed mid-sequence."""

from __future__ import annotations

import os
import queue
import signal
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._support.paths import REPO
from tests._support.serving import serve

OUTPUTS = ("SUM", "OUT_START", "OUT_END", "OUT_READY", "OUT_CORRID", "BATCH_READY", "PID")


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPO / "tests" / "repositories" / "sequence")) as s:
        yield s


class Sender:
    """One request at a time to a model over one protocol: 'grpc', 'http' or 'stream' (gRPC bidirectional)."""

    def __init__(self, server, protocol: str):
        self.protocol = protocol
        self.module = httpclient if protocol == "http" else grpcclient
        self.client = self.module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
        self.results: queue.Queue = queue.Queue()
        if protocol == "stream":
            self.client.start_stream(callback=lambda result, error: self.results.put((result, error)))

    def close(self):
        if self.protocol == "stream":
            self.client.stop_stream()
        self.client.close()

    def send(self, model, value, sequence_id, start=False, end=False, **kwargs):
        tensor = self.module.InferInput("INPUT", [1, 1], "INT32")
        tensor.set_data_from_numpy(np.array([[value]], dtype=np.int32))
        args = dict(sequence_id=sequence_id, sequence_start=start, sequence_end=end, **kwargs)
        if self.protocol == "stream":
            self.client.async_stream_infer(model, [tensor], **args)
            result, error = self.results.get(timeout=30)
            if error is not None:
                raise error
        else:
            result = self.client.infer(model, [tensor], **args)
        return {name: result.as_numpy(name).reshape(-1).tolist() for name in OUTPUTS}


@pytest.fixture(params=["grpc", "stream", "http"])
def sender(request, server):
    s = Sender(server, request.param)
    yield s
    s.close()


def ids(base: int, sender: Sender) -> int:
    return base + {"grpc": 0, "stream": 1000, "http": 2000}[sender.protocol]


def test_direct_delivers_start_end_ready_and_corrid_as_configured(sender):
    seq = ids(101, sender)
    first = sender.send("accumulator", 5, seq, start=True)
    middle = sender.send("accumulator", 6, seq)
    last = sender.send("accumulator", 7, seq, end=True)
    assert [first["OUT_START"], first["OUT_END"], first["OUT_READY"], first["OUT_CORRID"]] == [[1], [0], [1], [seq]]
    assert [middle["OUT_START"], middle["OUT_END"], middle["OUT_READY"]] == [[0], [0], [1]]
    assert [last["OUT_START"], last["OUT_END"], last["OUT_READY"]] == [[0], [1], [1]]
    assert [first["SUM"], middle["SUM"], last["SUM"]] == [[5], [11], [18]]
    assert first["PID"] == middle["PID"] == last["PID"]


def test_oldest_delivers_bool_fp32_and_int32_values_and_a_string_corrid(sender):
    seq = f"session-{sender.protocol}"
    first = sender.send("accumulator_oldest", 3, seq, start=True)
    last = sender.send("accumulator_oldest", 4, seq, end=True)
    assert first["OUT_START"] == [True] and first["OUT_END"] == [0.25] and first["OUT_READY"] == [11]
    assert last["OUT_START"] == [False] and last["OUT_END"] == [0.75] and last["OUT_READY"] == [11]
    assert first["OUT_CORRID"] == last["OUT_CORRID"] == [seq.encode()]
    assert last["SUM"] == [7]


def test_interleaved_sequences_keep_their_slot_and_instance(server):
    sender = Sender(server, "grpc")
    assert "sequence" in sender.client.get_server_metadata().extensions  # as Triton lists it
    seqs = [301, 302, 303, 304]  # slot 0 of each instance, then slot 1 of each
    firsts = {seq: sender.send("accumulator", seq - 300, seq, start=True) for seq in seqs}
    pids = {seq: firsts[seq]["PID"][0] for seq in seqs}
    assert len(set(pids.values())) == 2 and pids[301] != pids[302]
    assert {pids[303], pids[304]} == set(pids.values())
    sums = {seq: seq - 300 for seq in seqs}
    for round_ in range(3):
        for seq in reversed(seqs):
            answer = sender.send("accumulator", 10, seq, end=round_ == 2)
            sums[seq] += 10
            assert answer["SUM"] == [sums[seq]] and answer["PID"] == [pids[seq]]
            if seq in (303, 304):  # alone in slot 1: slot 0 of its instance is sent not ready
                assert answer["BATCH_READY"] == [0, 1]
    sender.close()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_refusals_use_tritons_codes_and_words(server, protocol):
    sender = Sender(server, protocol)
    status = "StatusCode.INVALID_ARGUMENT" if protocol == "grpc" else "400"
    with pytest.raises(InferenceServerException) as info:
        sender.send("accumulator", 1, 4242)
    assert info.value.status() == status
    assert info.value.message().endswith("inference request for sequence 4242 to model 'accumulator' must specify "
                                         "the START flag on the first request of the sequence")
    with pytest.raises(InferenceServerException) as info:
        sender.send("accumulator", 1, 0, start=True)
    assert "inference request to model 'accumulator' must specify a non-zero or non-empty correlation ID" in (
        info.value.message())
    with pytest.raises(InferenceServerException) as info:
        sender.send("accumulator", 1, "text", start=True)
    assert "sequence batching control 'CORRID' data-type is 'BYTES', but model 'accumulator' expects 'UINT64'" in (
        info.value.message())
    sender.close()


def test_an_idle_sequence_is_released_and_later_requests_refused(server):
    sender = Sender(server, "grpc")
    sender.send("short_idle", 1, 501, start=True)
    # The idle time must pass (that is what is tested); the test waits for the release itself, not for a guess.
    assert server.wait_for_log("sequence 501 of model 'short_idle' idle for more than"), server.log
    with pytest.raises(InferenceServerException, match="sequence 501 to model 'short_idle' must specify the START"):
        sender.send("short_idle", 1, 501)
    assert sender.send("short_idle", 2, 502, start=True, end=True)["SUM"] == [2]
    sender.close()


def test_a_worker_killed_mid_sequence_ends_it_with_a_clear_error(server, tmp_path):
    sender = Sender(server, "grpc")
    pid = sender.send("accumulator", 1, 601, start=True)["PID"][0]
    gate = str(tmp_path / "gate")
    results: queue.Queue = queue.Queue()
    tensor = grpcclient.InferInput("INPUT", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[1]], dtype=np.int32))
    sender.client.async_infer("accumulator", [tensor], callback=lambda result, error: results.put((result, error)),
                              sequence_id=601, parameters={"gate": gate})
    deadline = time.monotonic() + 30
    while not os.path.exists(gate + ".entered"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    _, error = results.get(timeout=30)
    assert error is not None and error.status() == "StatusCode.UNAVAILABLE"
    with pytest.raises(InferenceServerException) as info:
        sender.send("accumulator", 1, 601, end=True)
    assert info.value.status() == "StatusCode.UNAVAILABLE"
    assert "sequence 601 of model 'accumulator' ended: its model instance" in info.value.message()
    assert "went away" in info.value.message()
    deadline = time.monotonic() + 60
    while True:  # the instance comes back; a new sequence runs
        try:
            answer = sender.send("accumulator", 3, 602, start=True, end=True)
            break
        except InferenceServerException:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert answer["SUM"] == [3]
    sender.close()
