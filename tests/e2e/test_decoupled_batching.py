"""A decoupled repository model with dynamic batching (tests/repositories/decbatch/batched_stream), through
tritonclient gRPC streaming: concurrent streams merged into one execute() each get exactly their own responses and
final flag while the batch's senders interleave; one request of the batch failing or cancelled leaves the others
alone; the instance takes the next batch once every request of the one before has sent its final flag."""

from __future__ import annotations

import queue
import re
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests._support.paths import REPO
from tests._support.serving import serve
from tests._support.waits import wait_until

MODEL = "batched_stream"
FINAL = "final"


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPO / "tests" / "repositories" / "decbatch")) as s:
        yield s


class Stream:
    """One gRPC stream of its own client, with one request on it; what arrives is collected in order."""

    def __init__(self, server, count: int, tag: int, **parameters):
        self.client = grpcclient.InferenceServerClient(server.grpc_url)
        self.tag = tag
        self.arrived: queue.Queue = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self.arrived.put((result, error)))
        inputs = []
        for name, value in (("COUNT", count), ("TAG", tag)):
            tensor = grpcclient.InferInput(name, [1, 1], "INT32")
            tensor.set_data_from_numpy(np.array([[value]], dtype=np.int32))
            inputs.append(tensor)
        self.client.async_stream_infer(MODEL, inputs, request_id=str(tag), enable_empty_final_response=True,
                                       parameters=parameters or None)

    def next(self, timeout_s: float = 30) -> dict | str:
        """The next response's outputs, FINAL for the empty final response, or an error's message."""
        result, error = self.arrived.get(timeout=timeout_s)
        if error is not None:
            return error.message()
        if result.get_response().parameters["triton_final_response"].bool_param:
            return FINAL
        return {name: int(result.as_numpy(name).reshape(-1)[0]) for name in ("VALUE", "TAG", "BATCH", "INDEX")}

    def until_final(self) -> list[dict]:
        responses = []
        while (item := self.next()) != FINAL:
            assert isinstance(item, dict), item
            responses.append(item)
        return responses

    def close(self, cancel: bool = False) -> None:
        self.client.stop_stream(cancel_requests=cancel)
        self.client.close()


def pending(server) -> float:
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    pattern = r'^nv_inference_pending_request_count\{model="batched_stream"[^}]*\} (\S+)$'
    return sum(float(v) for v in re.findall(pattern, text, re.M))


def model_stats(server) -> dict[str, int]:
    statistics = grpcclient.InferenceServerClient(server.grpc_url).get_inference_statistics(MODEL, as_json=True)
    stats = statistics["model_stats"][0]
    batches = {int(b["batch_size"]): int(b["compute_infer"].get("count", 0)) for b in stats.get("batch_stats", [])}
    return {"execution_count": int(stats.get("execution_count", 0)),
            "inference_count": int(stats.get("inference_count", 0)), "batches_of_4": batches.get(4, 0)}


def check_own(stream: Stream, responses: list[dict], count: int, batch: int) -> int:
    """The stream got exactly its own COUNT responses in order, all from one execution of `batch` requests; returns
    its index in that batch."""
    assert [r["VALUE"] for r in responses] == list(range(count))
    assert {r["TAG"] for r in responses} == {stream.tag}
    assert {r["BATCH"] for r in responses} == {batch}
    (index,) = {r["INDEX"] for r in responses}
    return index


def test_concurrent_streams_merge_and_each_gets_its_own_responses_and_final(server):
    counts = [5, 40, 120, 1]
    before = model_stats(server)
    for round_ in range(2):  # the second batch runs once every request of the first has sent its final flag
        streams = [Stream(server, count, 100 * round_ + i) for i, count in enumerate(counts)]
        try:
            indices = [check_own(s, s.until_final(), count, 4) for s, count in zip(streams, counts)]
            assert sorted(indices) == [0, 1, 2, 3]  # one execute() got all four
            for stream in streams:
                with pytest.raises(queue.Empty):  # nothing after the final response
                    stream.arrived.get(timeout=0.05)
        finally:
            for stream in streams:
                stream.close()
    after = model_stats(server)
    assert (after["execution_count"] - before["execution_count"], after["inference_count"] - before["inference_count"],
            after["batches_of_4"] - before["batches_of_4"]) == (2, 8, 2)


def test_a_failing_and_a_cancelled_request_leave_the_rest_of_the_batch_alone(server, tmp_path):
    marker = tmp_path / "cancelled"
    streams = [Stream(server, 30, 1), Stream(server, 0, 2, mode="fail"),
               Stream(server, 0, 3, mode="until_cancelled", marker=str(marker)), Stream(server, 60, 4)]
    ok_a, failing, cancelled, ok_b = streams
    try:
        first = cancelled.next()
        assert isinstance(first, dict) and first["BATCH"] == 4 and first["TAG"] == 3
        cancelled.close(cancel=True)  # its client leaves: only its request is cancelled
        wait_until(marker.exists, "the model to see its request cancelled")
        assert failing.next()["VALUE"] == 0
        assert "request 2 failed" in failing.next()
        check_own(ok_a, ok_a.until_final(), 30, 4)
        check_own(ok_b, ok_b.until_final(), 60, 4)
        after = Stream(server, 3, 5)  # the instance is free again
        try:
            check_own(after, after.until_final(), 3, 1)
        finally:
            after.close()
    finally:
        for stream in (ok_a, failing, ok_b):
            stream.close()


def test_the_instance_stays_busy_until_every_request_of_its_batch_has_sent_its_final_flag(server, tmp_path):
    release = tmp_path / "release"
    quick, held = Stream(server, 3, 1), Stream(server, 2, 2, mode="hold", release=str(release))
    waiting = None
    try:
        check_own(quick, quick.until_final(), 3, 2)  # (the queue delay merged the two)
        waiting = Stream(server, 2, 3)
        wait_until(lambda: pending(server) == 1, "the third request to wait")
        assert held.arrived.empty() and waiting.arrived.empty()
        release.touch()  # the held request answers and sends its final flag: the instance takes the next batch
        check_own(held, held.until_final(), 2, 2)
        check_own(waiting, waiting.until_final(), 2, 1)
        assert pending(server) == 0
    finally:
        for stream in (quick, held, waiting):
            if stream is not None:
                stream.close()
