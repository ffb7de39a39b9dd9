"""`--execution-timeout` next to other work: executions that wait on their worker behind another one, requests
queued while an execution hangs (issue 13, item 5; the claim of docs/security.md "Execution timeout")."""

from __future__ import annotations

import queue
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests.conftest import serve, tensor_args
from tests.e2e.test_workers import SLOW_PID, async_pid_request

COUNTDOWN = ["--decoupled"] + tensor_args("input", [("COUNT", "int32", "1")]) + tensor_args(
    "output", [("VALUE", "int32", "1")])

PIPELINED_TIMER = (
    "The execution timer starts when the scheduler hands an execution to its instance "
    "(ModelScheduler._start, pytriton/scheduler/dispatcher.py:297-298), but without dynamic batching an instance "
    "holds PYTRITON_PIPELINE_DEPTH=2 executions and the worker runs them one after the other: the second one's "
    "clock runs while it waits in the worker's socket behind the first. Two executions of 1.2 s each under a 2 s "
    "timeout: the second 'times out' at 2 s, fails, and the healthy worker is SIGKILLed (with whatever else it "
    "held). Fix: arm the timer of an execution only once it is the oldest on its instance (keep `_running` per "
    "instance in order; in `_execution_ended` arm the next one's timer), since an instance runs its executions in "
    "the order it received them.")


@pytest.mark.xfail(strict=True, reason=PIPELINED_TIMER)
def test_an_execution_waiting_behind_another_on_its_worker_is_not_timed_out():
    with serve("tests.models:slow_pid", "--execution-timeout", "2", *SLOW_PID) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        (pid,) = server.worker_pids()
        pending = [async_pid_request(client, 1.2) for _ in range(2)]  # each well within the timeout
        for results in pending:
            result, error = results.get(timeout=30)
            assert error is None, str(error)
            assert int(result.as_numpy("PID")[0]) == pid
        assert "killing" not in server.log


@pytest.mark.xfail(strict=True, reason=PIPELINED_TIMER + " For a stream the timer is re-armed on each response "
                   "(_Execution.deliver), but the stream waiting behind a long, healthy stream still times out and "
                   "the worker is killed in the middle of the healthy stream.")
def test_a_stream_waiting_behind_a_long_stream_is_not_timed_out():
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


@pytest.mark.xfail(strict=True, reason=(
    "When an execution times out, _Execution.expired (pytriton/scheduler/dispatcher.py:102-111) first fails it "
    "(fail -> _end -> ModelScheduler._execution_ended), which gives the stuck instance its room back and at once "
    "starts the next queued request on it, and only then removes the instance (_instance_stuck) and kills its "
    "worker: the request that was waiting is sent to the hung worker and fails with 'worker ... was killed by "
    "SIGKILL' instead of waiting for the restarted worker (or going to a healthy instance). Fix: in expired(), "
    "remove the instance from the scheduler before failing the execution (then _execution_ended finds it gone)."))
def test_a_request_queued_behind_a_hung_execution_runs_on_the_restarted_worker():
    env = {"PYTRITON_PIPELINE_DEPTH": "1"}  # one execution per instance: the second request waits in the queue
    with serve("tests.models:slow_pid", "--execution-timeout", "1", *SLOW_PID, env=env) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        (old_pid,) = server.worker_pids()
        hung = async_pid_request(client, 60)
        time.sleep(0.5)  # the hung request is the one that starts
        queued = async_pid_request(client, 0)
        _, error = hung.get(timeout=30)
        assert "execution timeout" in str(error)
        result, error = queued.get(timeout=60)
        assert error is None, str(error)
        assert int(result.as_numpy("PID")[0]) != old_pid  # it ran on the restarted worker
