"""A decoupled Python-backend model's responses reach the client as they are sent, while execute still runs (sent
from execute's own thread or from another): the model waits inside execute for a file the test creates only once the
first response arrived."""

from __future__ import annotations

import queue

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests._support.paths import REPO
from tests._support.serving import serve


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPO / "tests" / "repositories" / "pyfix")) as s:
        yield s


@pytest.mark.parametrize("from_thread", [False, True], ids=["execute-thread", "other-thread"])
def test_first_response_arrives_while_execute_runs(server, tmp_path, from_thread):
    gate = tmp_path / "gate"
    client = grpcclient.InferenceServerClient(server.grpc_url)
    arrived: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: arrived.put((result, error)))
    try:
        tensor = grpcclient.InferInput("IN", [1], "INT32")
        tensor.set_data_from_numpy(np.array([7], dtype=np.int32))
        client.async_stream_infer("gated_stream", [tensor], parameters={"gate": str(gate), "thread": from_thread})
        result, error = arrived.get(timeout=60)
        assert error is None, error
        assert result.as_numpy("OUT").tolist() == [7]
        assert not gate.exists()
        gate.touch()  # only now may execute go on (and return)
        result, error = arrived.get(timeout=60)
        assert error is None, error
        assert result.as_numpy("OUT").tolist() == [8]
    finally:
        client.stop_stream()
        client.close()


def test_a_task_of_async_execute_sends_after_execute_returned(server, tmp_path):
    """`async def execute` runs on the model's event loop, which goes on running once execute returned (as on
    Triton's stub): a task it started sends the request's last response and the final flag later."""
    gate = tmp_path / "gate"
    client = grpcclient.InferenceServerClient(server.grpc_url)
    arrived: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: arrived.put((result, error)))
    try:
        tensor = grpcclient.InferInput("IN", [1], "INT32")
        tensor.set_data_from_numpy(np.array([7], dtype=np.int32))
        client.async_stream_infer("async_later", [tensor], parameters={"gate": str(gate)},
                                  enable_empty_final_response=True)
        result, error = arrived.get(timeout=60)
        assert error is None, error
        assert result.as_numpy("OUT").tolist() == [7]
        gate.touch()  # (execute returned long ago: it sent the first response and returned)
        result, error = arrived.get(timeout=60)
        assert error is None, error
        assert result.as_numpy("OUT").tolist() == [8]
        assert result.get_response().parameters["triton_final_response"].bool_param
    finally:
        client.stop_stream()
        client.close()
