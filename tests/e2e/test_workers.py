"""Worker processes: several instances, a worker killed mid-request, graceful stop, crash clean-up."""

from __future__ import annotations

import fcntl
import os
import signal
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.metrics import metric_sum
from tests._support.model_calls import SLOW_PID, async_pid_request, pid_request
from tests._support.processes import pid_alive
from tests._support.serving import ServerProcess, serve, tensor_args
from tests._support.shm import shm_segments_of
from tests._support.waits import wait_for_file, wait_until

def test_instances_run_in_parallel_processes():
    with serve("tests.models:slow_pid", "--instances", "3", *SLOW_PID) as server:
        assert len(server.worker_pids()) == 3
        client = grpcclient.InferenceServerClient(server.grpc_url)
        pending = [async_pid_request(client, 0.5) for _ in range(3)]
        pids = set()
        for results in pending:
            result, error = results.get(timeout=20)
            assert error is None
            pids.add(int(result.as_numpy("PID")[0]))
        assert pids == set(server.worker_pids())
        config = client.get_model_config("slow_pid", as_json=True)["config"]
        assert config["instance_group"][0]["count"] == 3


def test_worker_killed_mid_request_fails_it_and_is_restarted(tmp_path):
    with serve("tests.models:slow_pid", *SLOW_PID) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        (old_pid,) = server.worker_pids()
        assert int(pid_request(client).as_numpy("PID")[0]) == old_pid

        results = async_pid_request(client, 30, started=tmp_path / "started")
        wait_for_file(tmp_path / "started")  # the worker is now inside the callable
        os.kill(old_pid, signal.SIGKILL)
        started = time.monotonic()
        result, error = results.get(timeout=10)
        assert result is None
        assert time.monotonic() - started < 5
        assert error.status() == "StatusCode.UNAVAILABLE"
        assert "slow_pid_0_0" in error.message() and "killed by SIGKILL" in error.message()

        assert server.wait_for_log("started (pid", timeout_s=20)
        deadline = time.monotonic() + 20
        while len(server.worker_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        new_pid = server.worker_pids()[-1]
        assert new_pid != old_pid
        assert int(pid_request(client).as_numpy("PID")[0]) == new_pid
        assert shm_segments_of({old_pid}) == []
        assert client.is_server_ready()
        stats = client.get_inference_statistics("slow_pid", as_json=True)["model_stats"][0]
        assert int(stats["inference_stats"]["fail"]["count"]) == 1


def test_a_callable_that_exits_answers_its_call_and_its_worker_is_restarted():
    """sys.exit() in the callable: the call gets the error (it used to get 'worker exited with code N' once the
    process was found gone), the worker says it stopped serving before it exits, and it is restarted."""
    with serve("tests.models:exiting_pid", "--model-name", "slow_pid", *SLOW_PID) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        (old_pid,) = server.worker_pids()
        tensor = grpcclient.InferInput("INPUT", [4], "FP32")
        tensor.set_data_from_numpy(np.zeros(4, dtype=np.float32))
        with pytest.raises(InferenceServerException) as info:
            client.infer("slow_pid", [tensor], parameters={"exit": "5"}, client_timeout=20)
        assert "SystemExit: 5" in info.value.message()
        # The server's line, not the worker's own (which it logs before telling the server): once the server has
        # taken the instance out, the next request waits for the restarted worker instead of meeting the old one.
        assert server.wait_for_log(f"(pid {old_pid}) stopped serving: SystemExit: 5", timeout_s=20)
        result = pid_request(client, client_timeout=30)  # waits for the restarted worker
        assert int(result.as_numpy("PID")[0]) != old_pid
        assert shm_segments_of({old_pid}) == []


def test_requests_wait_for_a_restarting_worker():
    with serve("tests.models:slow_pid", *SLOW_PID) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        (old_pid,) = server.worker_pids()
        os.kill(old_pid, signal.SIGKILL)
        assert server.wait_for_log("restarting it")
        # Sent while the only instance is restarting: waits for the new one instead of failing.
        result = pid_request(client, client_timeout=30)
        assert int(result.as_numpy("PID")[0]) != old_pid


def test_graceful_stop_finishes_in_flight_requests_and_cleans_up(tmp_path):
    server = ServerProcess(["tests.models:slow_pid", *SLOW_PID])
    client = grpcclient.InferenceServerClient(server.grpc_url)
    workers = server.worker_pids()
    results = async_pid_request(client, 1.0, started=tmp_path / "started")
    wait_for_file(tmp_path / "started")  # in flight: the worker runs it
    assert server.stop(signal.SIGTERM) == 0
    result, error = results.get(timeout=10)
    assert error is None, error
    assert int(result.as_numpy("PID")[0]) == workers[0]
    pids = {server.process.pid, *workers}
    assert not any(pid_alive(p) for p in pids)
    assert shm_segments_of(pids) == []
    assert "pytriton server stopped" in server.log


def test_killed_server_takes_workers_down_and_next_server_sweeps_its_segments():
    args = tensor_args("input", [("INPUT", "fp32", "-1")]) + tensor_args("output", [("PID", "int64", "1")])
    server = ServerProcess(["tests.models:slow_pid", *args])
    try:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        big = grpcclient.InferInput("INPUT", [1 << 18], "FP32")
        big.set_data_from_numpy(np.zeros(1 << 18, dtype=np.float32))  # 1 MiB: travels through the request arena
        client.infer("slow_pid", [big])
        workers = server.worker_pids()
        server_pid = server.process.pid
        names = shm_segments_of({server_pid})
        assert names, "the server's request arena should exist"
        # Other test processes start servers meanwhile, and every start sweeps what dead servers left: wait for a
        # shared lock on each segment now, granted the moment the killed server's own lock goes, so no sweep (which
        # needs the segment's lock alone) takes them before this test's next server does.
        held = [os.open(f"/dev/shm/{name}", os.O_RDONLY) for name in names]
        waiters = [threading.Thread(target=fcntl.flock, args=(fd, fcntl.LOCK_SH), daemon=True) for fd in held]
        for waiter in waiters:
            waiter.start()
    finally:
        server.stop(signal.SIGKILL)
    try:
        for waiter in waiters:
            waiter.join(10)
        assert not any(waiter.is_alive() for waiter in waiters)
        assert sorted(shm_segments_of({server_pid})) == sorted(names)  # a SIGKILLed server cannot clean up ...
        deadline = time.monotonic() + 10
        while any(pid_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(pid_alive(p) for p in workers), "workers must exit when their server dies"
        assert shm_segments_of(set(workers)) == []
    finally:
        for fd in held:
            os.close(fd)
    with serve("tests.models:slow_pid", *SLOW_PID):
        assert shm_segments_of({server_pid}) == []  # ... the next server sweeps them


def test_async_callable():
    args = tensor_args("input", [("IN_X", "int16", "-1")]) + tensor_args("output", [("OUT_X", "int16", "-1")])
    with serve("tests.models:async_identity", *args) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        tensor = grpcclient.InferInput("IN_X", [3], "INT16")
        data = np.array([1, -2, 3], dtype=np.int16)
        tensor.set_data_from_numpy(data)
        np.testing.assert_array_equal(client.infer("async_identity", [tensor]).as_numpy("OUT_X"), data)


def test_unloadable_callable_fails_start_with_clear_error():
    with pytest.raises(RuntimeError, match="has no attribute 'missing'"):
        ServerProcess(["tests.models:missing", *SLOW_PID], timeout_s=30)


def test_a_request_abandoned_by_its_client_keeps_its_instance_busy_until_done():
    with serve("tests.models:slow_pid", "--instances", "2", *SLOW_PID) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        pid_request(client)  # warm both paths
        with pytest.raises(InferenceServerException, match="Deadline"):
            pid_request(client, sleep=4.0, client_timeout=0.3)
        started = time.monotonic()
        pid_request(client)  # must go to the other, idle instance, not queue behind the abandoned one (~3.7 s)
        assert time.monotonic() - started < 2.5
        # The abandoned request is done (no execution in flight): its instance takes work again.
        wait_until(lambda: metric_sum(server, "pytriton_model_executions_in_flight") == 0, "the abandoned request done")
        pending = [async_pid_request(client, 0.6) for _ in range(2)]
        outputs = [results.get(timeout=10) for results in pending]
        assert all(error is None for _, error in outputs), outputs
        # Two pids: each instance took one (a busy instance would have left both to the other one, one after the other).
        assert len({int(result.as_numpy("PID")[0]) for result, _ in outputs}) == 2


def test_large_grpc_responses_release_their_worker_segments():
    """Each 20 MiB output gets a dedicated response segment in the worker; once gRPC has sent the response the
    server frees it, so the worker's segments do not pile up over many requests."""
    args = tensor_args("input", [("IN_X", "uint8", "-1")]) + tensor_args("output", [("OUT_X", "uint8", "-1")])
    with serve("tests.models:identity", *args) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        (worker,) = server.worker_pids()
        data = np.arange(20 << 20, dtype=np.uint64).astype(np.uint8)
        for _ in range(6):
            tensor = grpcclient.InferInput("IN_X", [data.size], "UINT8")
            tensor.set_data_from_numpy(data)
            result = client.infer("identity", [tensor])
            assert np.array_equal(result.as_numpy("OUT_X"), data)
        # Freed slots ride on the next request: at most the last response's segment (and the worker's regular
        # segment) may still exist, never one per request.
        assert len(shm_segments_of({worker})) <= 2, shm_segments_of({worker})
        client.close()
