"""Requests whose clients go away must not run, also when they already wait on a worker behind another request
(without dynamic batching an instance holds two executions: the second waits in the worker's socket)."""

from __future__ import annotations

import queue

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.metrics import pending_requests
from tests._support.model_calls import SLOW_PID, async_pid_request, pid_request
from tests._support.serving import serve, tensor_args
from tests._support.waits import wait_for_file, wait_until

ARGS = ["--decoupled"] + tensor_args("input", [("COUNT", "int32", "1")]) + tensor_args(
    "output", [("VALUE", "int32", "1")])


def open_stream(url: str, count: int) -> tuple[grpcclient.InferenceServerClient, queue.Queue]:
    """A client with one stream asking `countdown` for `count` responses."""
    client = grpcclient.InferenceServerClient(url)
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    tensor = grpcclient.InferInput("COUNT", [1], "INT32")
    tensor.set_data_from_numpy(np.array([count], dtype=np.int32))
    client.async_stream_infer("countdown", [tensor], enable_empty_final_response=True)
    return client, results


def test_a_cancelled_stream_waiting_behind_another_does_not_run():
    """While the worker streamed A it read the waiting stream B's INFER into its backlog but dropped B's CANCEL (it
    was not A's), so B ran to its end for nobody (here 1000 s), holding the instance and the in-flight count."""
    with serve("tests.models:slow_countdown", "--model-name", "countdown", "--exit-timeout", "1", *ARGS) as server:
        first, first_results = open_stream(server.grpc_url, 100_000)  # 10 ms per response: 1000 s
        assert first_results.get(timeout=20)[1] is None  # it runs
        second, _ = open_stream(server.grpc_url, 100_000)  # waits behind the first in the worker's socket
        # Its request reaches the server (the client gives no sign of that): it is counted pending, handed to the
        # instance behind the first.
        wait_until(lambda: pending_requests(server) == 1, "the second stream's request pending")
        second.stop_stream(cancel_requests=True)
        first.stop_stream(cancel_requests=True)
        # Both streams are gone: the model is idle and answers the next stream at once.
        third, third_results = open_stream(server.grpc_url, 1)
        try:
            result, error = third_results.get(timeout=10)
        except queue.Empty:
            pytest.fail("a stream on an idle model got no answer within 10 s: the cancelled stream still runs")
        finally:
            third.stop_stream(cancel_requests=True)
        assert error is None, str(error)
        assert int(result.as_numpy("VALUE")[0]) == 0


def test_a_request_whose_client_left_while_it_waited_behind_another_does_not_run(tmp_path):
    """The worker ignored CANCEL for unary calls: a request whose deadline passed while it waited on the worker
    behind another one still ran (here 30 s) before anything sent after it."""
    with serve("tests.models:slow_pid", "--exit-timeout", "1", *SLOW_PID) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        running = async_pid_request(client, 2, started=tmp_path / "started")
        wait_for_file(tmp_path / "started")  # it runs
        with pytest.raises(InferenceServerException, match="Deadline"):
            pid_request(client, sleep=30, client_timeout=0.5)  # waits on the worker behind the first, then gives up
        assert running.get(timeout=30)[1] is None
        pid_request(client, client_timeout=10)  # answered at once: the abandoned request never ran
