"""The dynamic batcher: concurrent requests run together as one List[Request], within max_batch_size."""

from __future__ import annotations

import queue

import numpy as np
import tritonclient.grpc as grpcclient

from tests._support.serving import serve, tensor_args

ARGS = tensor_args("input", [("INPUT", "fp32", "4")]) + tensor_args("output", [("SEEN", "int32", "2")])


def send(client, count, batch=1, width=4):
    results: queue.Queue = queue.Queue()
    for _ in range(count):
        tensor = grpcclient.InferInput("INPUT", [batch, width], "FP32")
        tensor.set_data_from_numpy(np.zeros((batch, width), dtype=np.float32))
        client.async_infer("batch_size_seen", [tensor], callback=lambda result, error: results.put((result, error)))
    seen = []
    for _ in range(count):
        result, error = results.get(timeout=30)
        assert error is None, error
        seen.append(tuple(result.as_numpy("SEEN")[0]))
    return seen


def test_concurrent_requests_are_batched_up_to_the_limit():
    args = ["--max-batch-size", "8", "--dynamic-batching", "--max-queue-delay-us", "200000", *ARGS]
    with serve("tests.models:batch_size_seen", *args) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        seen = send(client, 8)
        assert max(requests for requests, _ in seen) > 1  # several requests in one execution
        assert all(total <= 8 for _, total in seen)
        seen = send(client, 6, batch=3)  # 3 + 3 fit, a third one would exceed 8
        assert all(total <= 8 and requests <= 2 for requests, total in seen)
        stats = client.get_inference_statistics("batch_size_seen", as_json=True)["model_stats"][0]
        assert int(stats["inference_stats"]["success"]["count"]) == 14
        assert int(stats["inference_count"]) == 8 + 18
        assert int(stats["execution_count"]) < 14
        sizes = {int(b["batch_size"]) for b in stats["batch_stats"]}
        assert max(sizes) > 1


def test_without_the_batcher_each_request_runs_alone():
    with serve("tests.models:batch_size_seen", "--max-batch-size", "8", *ARGS) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        assert {requests for requests, _ in send(client, 6)} == {1}
