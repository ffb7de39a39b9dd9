"""A model's queue policy (Triton's ModelQueuePolicy in its dynamic batcher) is what a PyTriton user sets to keep a
flood of requests from queueing without bound; the server must enforce what the model's configuration says."""

from __future__ import annotations

import queue
import threading

import numpy as np
import tritonclient.grpc as grpcclient

from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, QueuePolicy, Tensor
from pytriton.triton import Triton, TritonConfig

from tests._support.ports import FREE_PORTS

REJECTED = 5
"""Of 8 requests sent while the first execution is held: one runs, two wait in the queue, five find it full."""


def test_requests_past_the_max_queue_size_are_rejected_at_once():
    started, release = threading.Event(), threading.Event()

    @batch
    def gated_identity(x):
        """Holds its execution until the test releases it: the queue behind it stays full meanwhile."""
        started.set()
        release.wait(60)
        return {"y": x}

    with Triton(config=TritonConfig(**FREE_PORTS)) as triton:
        policy = QueuePolicy(max_queue_size=2)
        triton.bind("slow", gated_identity, inputs=[Tensor(name="x", shape=(1,), dtype=np.float32)],
                    outputs=[Tensor(name="y", shape=(1,), dtype=np.float32)],
                    config=ModelConfig(max_batch_size=1, batcher=DynamicBatcher(default_queue_policy=policy)))
        triton.run()
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{triton.ports['grpc']}")
        configured = client.get_model_config("slow", as_json=True)["config"]["dynamic_batching"]
        assert int(configured["default_queue_policy"]["max_queue_size"]) == 2
        results: queue.Queue = queue.Queue()
        for _ in range(8):  # one runs, two wait, the others find the queue full
            tensor = grpcclient.InferInput("x", [1, 1], "FP32")
            tensor.set_data_from_numpy(np.ones((1, 1), dtype=np.float32))
            client.async_infer("slow", [tensor], callback=lambda result, error: results.put(error))
        # The execution is held: the one it runs and the two in the queue are accepted, the other five are answered
        # at once with the refusal (however slowly the eight were sent); then the held ones run.
        assert started.wait(30), "the first request never ran"
        try:
            rejected = [str(results.get(timeout=30)) for _ in range(REJECTED)]
        finally:
            release.set()
        accepted = [results.get(timeout=60) for _ in range(8 - REJECTED)]
        client.close()
        assert all("Exceeds maximum queue size" in message for message in rejected), rejected
        assert accepted == [None] * (8 - REJECTED), accepted
