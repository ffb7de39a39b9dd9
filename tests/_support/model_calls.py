"""How to serve and call some models of tests/models.py: their `pytriton serve` options and a request to each."""

from __future__ import annotations

import os
import queue
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient

from tests._support.serving import tensor_args

SLOW_PID = tensor_args("input", [("INPUT", "fp32", "4")]) + tensor_args("output", [("PID", "int64", "1")])
"""`tests.models:slow_pid`: creates the file named by its `started` request parameter (if any), sleeps its `sleep`
request parameter, answers its worker's PID."""

ADD_SUB = ["--max-batch-size", "0"] + tensor_args("input", [("INPUT0", "int32", "16"), ("INPUT1", "int32", "16")]) \
    + tensor_args("output", [("OUTPUT0", "int32", "16"), ("OUTPUT1", "int32", "16")])
"""`tests.models:add_sub` without batching: INPUT0, INPUT1 INT32 [16]."""

DECOUPLED_COUNT = ["--decoupled"] + tensor_args("input", [("COUNT", "int32", "1")]) \
    + tensor_args("output", [("VALUE", "int32", "1")])
"""The decoupled models of tests/models.py that answer COUNT INT32 [1] with a stream of VALUE INT32 [1] (`countdown`,
`delayed_countdown`, ...)."""


def pid_request(client: Any, sleep: float = 0.0, **kwargs: Any) -> Any:
    """One slow_pid call over gRPC that sleeps `sleep` seconds in the worker."""
    tensor = grpcclient.InferInput("INPUT", [4], "FP32")
    tensor.set_data_from_numpy(np.zeros(4, dtype=np.float32))
    return client.infer("slow_pid", [tensor], parameters={"sleep": str(sleep)}, **kwargs)


def async_pid_request(client: Any, sleep: float, started: str | os.PathLike[str] | None = None) -> queue.Queue:
    """The same with `async_infer`: the queue gets (result, error). With `started`, the worker creates that file when
    it begins this request (wait for it with `waits.wait_for_file`)."""
    results: queue.Queue = queue.Queue()
    tensor = grpcclient.InferInput("INPUT", [4], "FP32")
    tensor.set_data_from_numpy(np.zeros(4, dtype=np.float32))
    parameters = {"sleep": str(sleep)}
    if started is not None:
        parameters["started"] = os.fspath(started)
    client.async_infer(
        "slow_pid", [tensor], callback=lambda result, error: results.put((result, error)), parameters=parameters,
    )
    return results


def add_sub_inputs() -> list[grpcclient.InferInput]:
    """ADD_SUB's inputs over gRPC: 0..15 each."""
    tensors = []
    for name in ("INPUT0", "INPUT1"):
        tensor = grpcclient.InferInput(name, [16], "INT32")
        tensor.set_data_from_numpy(np.arange(16, dtype=np.int32))
        tensors.append(tensor)
    return tensors


def stream_delayed_countdown(url: str, delays_and_counts: list[tuple[float, int]]) -> None:
    """`tests.models:delayed_countdown` (decoupled): one request after the other on a gRPC stream, each answered in
    full before the next is sent."""
    results: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(url) as client:
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        for delay, count in delays_and_counts:
            x = grpcclient.InferInput("COUNT", [1], "INT32")
            x.set_data_from_numpy(np.array([count], dtype=np.int32))
            client.async_stream_infer("delayed_countdown", [x], parameters={"first_delay": delay},
                                      enable_empty_final_response=True)
            while True:
                result, error = results.get(timeout=30)
                assert error is None, error
                if result.get_response().parameters["triton_final_response"].bool_param:
                    break
        client.stop_stream()
