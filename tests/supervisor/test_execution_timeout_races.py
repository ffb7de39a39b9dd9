"""`--execution-timeout` next to other work: executions that wait on their worker behind another one, requests
queued while an execution hangs (issue 13, item 5; the claim of docs/security.md "Execution timeout")."""

from __future__ import annotations

import queue

import numpy as np
import tritonclient.grpc as grpcclient

from tests._support.model_calls import SLOW_PID, async_pid_request
from tests._support.serving import serve, tensor_args
from tests._support.waits import wait_for_file

COUNTDOWN = ["--decoupled"] + tensor_args("input", [("COUNT", "int32", "1")]) + tensor_args(
    "output", [("VALUE", "int32", "1")])


def test_an_execution_waiting_behind_another_on_its_worker_is_not_timed_out():
    """Without dynamic batching an instance holds two executions and its worker runs them in turn. The clock of the
    second used to start when it was handed over, so two executions of 1.2 s under a 2 s timeout failed the second
    and killed a healthy worker; it now starts when the first one ends."""
    with serve("tests.models:slow_pid", "--execution-timeout", "2", *SLOW_PID) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        (pid,) = server.worker_pids()
        pending = [async_pid_request(client, 1.2) for _ in range(2)]  # each well within the timeout
        for results in pending:
            result, error = results.get(timeout=30)
            assert error is None, str(error)
            assert int(result.as_numpy("PID")[0]) == pid
        assert "killing" not in server.log


def test_a_stream_waiting_behind_a_long_stream_is_not_timed_out():
    """A long stream answering often is within the timeout (it counts from the last response); the stream waiting
    behind it on the same worker used to time out and get the worker killed in the middle of the long one."""
    with serve("tests.models:slow_countdown", "--model-name", "countdown", "--execution-timeout", "1",
               *COUNTDOWN) as server:
        streams = []
        for count in (150, 1):  # 150 responses 10 ms apart (a response at least every second), then one
            client = grpcclient.InferenceServerClient(server.grpc_url)
            results: queue.Queue = queue.Queue()
            client.start_stream(callback=lambda result, error, results=results: results.put((result, error)))
            tensor = grpcclient.InferInput("COUNT", [1], "INT32")
            tensor.set_data_from_numpy(np.array([count], dtype=np.int32))
            client.async_stream_infer("countdown", [tensor], enable_empty_final_response=True)
            streams.append((client, results, count, []))
            if count == 150:  # the long stream runs before the short one is sent
                result, error = results.get(timeout=30)
                assert error is None, str(error)
                streams[0][3].append(int(result.as_numpy("VALUE")[0]))
        for client, results, count, values in streams:
            while True:
                result, error = results.get(timeout=30)
                assert error is None, str(error)
                if result.get_response().parameters["triton_final_response"].bool_param:
                    break
                values.append(int(result.as_numpy("VALUE")[0]))
            client.stop_stream()
            assert values == list(range(count - 1, -1, -1))
        assert "killing" not in server.log


def test_a_request_queued_behind_a_hung_execution_runs_on_the_restarted_worker(tmp_path):
    """A timed-out execution used to give its instance's room back before the instance left the scheduler, so the
    request waiting in the queue was sent to the worker being killed and failed with it."""
    env = {"PYTRITON_PIPELINE_DEPTH": "1"}  # one execution per instance: the second request waits in the queue
    with serve("tests.models:slow_pid", "--execution-timeout", "1", *SLOW_PID, env=env) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        (old_pid,) = server.worker_pids()
        hung = async_pid_request(client, 60, started=tmp_path / "hung")
        wait_for_file(tmp_path / "hung")  # the hung request is the one that starts
        queued = async_pid_request(client, 0)
        _, error = hung.get(timeout=30)
        assert "execution timeout" in str(error)
        result, error = queued.get(timeout=60)
        assert error is None, str(error)
        assert int(result.as_numpy("PID")[0]) != old_pid  # it ran on the restarted worker
