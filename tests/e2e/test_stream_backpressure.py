"""ModelStreamInfer through tritonclient with backpressure on: long streams cross many credit windows whole and in
order (with and without dynamic batching), and one stream's requests in flight are capped
(`--grpc-max-stream-requests-in-flight`). The memory bounds are in tests/scheduler/test_stream_flow_e2e.py (slow)."""

from __future__ import annotations

import queue
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests._support.model_calls import DECOUPLED_COUNT
from tests._support.serving import serve, tensor_args

GATED = tensor_args("input", [("INPUT", "fp32", "-1")]) + tensor_args("output", [("PID", "int64", "1")])


BATCHED = ["--decoupled", "--max-batch-size", "4", "--dynamic-batching", "--max-queue-delay-us", "200000",
           *tensor_args("input", [("COUNT", "int32", "1")]),
           *tensor_args("output", [("VALUE", "int32", "1"), ("SEEN", "int32", "1")])]


@pytest.mark.parametrize("batched", [False, True], ids=["alone", "batched"])
def test_long_streams_arrive_whole_and_in_order(batched):
    """1,500 responses per request (the worker runs at most 64 ahead of what the server has passed on), three
    requests on three streams at once; batched, one execution serves them all, paced by the slowest reader."""
    target, args = ("batched_countdown", BATCHED) if batched else ("countdown", DECOUPLED_COUNT)
    with serve(f"tests.models:{target}", "--model-name", "countdown", *args) as server:
        clients = [grpcclient.InferenceServerClient(server.grpc_url) for _ in range(3)]
        shape = [1, 1] if batched else [1]
        streams = []
        for client in clients:
            results: queue.Queue = queue.Queue()
            client.start_stream(callback=lambda result, error, results=results: results.put((result, error)))
            tensor = grpcclient.InferInput("COUNT", shape, "INT32")
            tensor.set_data_from_numpy(np.full(shape, 1500, dtype=np.int32))
            client.async_stream_infer("countdown", [tensor], enable_empty_final_response=True)
            streams.append(results)
        seen = set()
        for client, results in zip(clients, streams):
            values = []
            while True:
                result, error = results.get(timeout=60)
                assert error is None, error.message()
                if result.get_response().parameters["triton_final_response"].bool_param:
                    break
                values.append(int(result.as_numpy("VALUE").reshape(-1)[0]))
                if batched:
                    seen.add(int(result.as_numpy("SEEN").reshape(-1)[0]))
            assert values == list(range(1499, -1, -1))
            client.stop_stream()
            client.close()
        assert not batched or seen == {3}, seen  # (the queue delay gathered all three into one execution)


def test_a_streams_requests_in_flight_are_capped(tmp_path):
    """With `--grpc-max-stream-requests-in-flight 2`, five requests on one stream to a model with four instances:
    two run, the third is read only when one of them ends."""
    with serve("tests.models:gated_pid", "--instances", "4", "--grpc-max-stream-requests-in-flight", "2",
               *GATED) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        results: queue.Queue = queue.Queue()
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        release = tmp_path / "release"
        started = [tmp_path / f"{i}.started" for i in range(5)]
        try:
            for path in started:
                tensor = grpcclient.InferInput("INPUT", [4], "FP32")
                tensor.set_data_from_numpy(np.zeros(4, dtype=np.float32))
                client.async_stream_infer("gated_pid", [tensor], parameters={"started": str(path),
                                                                              "release": str(release)})
            deadline = time.monotonic() + 20
            while sum(p.exists() for p in started) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(1.0)  # an absence check: time for a third to start, were it read (slowness only hides one)
            assert sum(p.exists() for p in started) == 2
        finally:
            release.touch()
        for _ in range(5):
            _, error = results.get(timeout=30)
            assert error is None, error.message()
        assert all(p.exists() for p in started)
        client.stop_stream()
        client.close()
