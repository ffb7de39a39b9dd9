"""A stop always ends within the exit timeout: after a worker was killed (during the restart backoff, during the
restart's spawn, after it), and with a callable that never returns."""

from __future__ import annotations

import os
import queue
import random
import signal
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests._support.processes import alive_after
from tests._support.rss import descendants
from tests._support.serving import ServerProcess, tensor_args
from tests._support.shm import shm_segments_of
from tests._support.waits import wait_for_file, wait_until

SLOW_PID = tensor_args("input", [("INPUT", "fp32", "4")]) + tensor_args("output", [("PID", "int64", "1")])
# What a stop may take beyond the exit timeout: the interpreter's own exit after the server has stopped.
EXIT_SLACK_S = 2.5


def _stop_timed(server: ServerProcess, exit_timeout_s: float) -> float:
    started = time.monotonic()
    code = server.stop(signal.SIGINT, timeout_s=exit_timeout_s + 60)
    elapsed = time.monotonic() - started
    assert code == 0, server.log
    return elapsed


def _assert_all_gone(server: ServerProcess, pids: set[int]) -> None:
    assert not alive_after(pids, 10.0), server.log
    assert shm_segments_of(pids) == []


def _kill_a_worker_then_stop(moment: str, exit_timeout_s: float) -> tuple[float, ServerProcess]:
    server = ServerProcess(["tests.models:slow_pid", "--instances", "2", "--exit-timeout", str(exit_timeout_s),
                            *SLOW_PID])
    os.kill(server.worker_pids()[0], signal.SIGKILL)
    if moment != "at-once":
        assert server.wait_for_log("restarting it"), server.log
    if moment == "spawn":  # past the first restart backoff: the new worker is starting up (a process below the
        # server, forked by its worker template or not, that has not said hello yet), or, on a machine too slow to see
        # that, it has just started
        wait_until(lambda: set(descendants(server.process.pid)) - set(server.worker_pids()) - set(server.template_pids())
                   or len(server.worker_pids()) == 3, "the new worker starting")
    elif moment == "restarted":
        deadline = time.monotonic() + 30
        while len(server.worker_pids()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.worker_pids()) == 3, server.log
    elif isinstance(moment, str) and moment.startswith("after-"):
        time.sleep(float(moment[len("after-"):]))
    return _stop_timed(server, exit_timeout_s), server


@pytest.mark.parametrize("moment", ["at-once", "backoff", "spawn", "restarted"])
def test_stop_after_a_worker_was_killed_ends_in_time(moment):
    exit_timeout_s = 20.0
    elapsed, server = _kill_a_worker_then_stop(moment, exit_timeout_s)
    assert elapsed < exit_timeout_s, f"stop took {elapsed:.1f} s; log:\n{server.log}"
    # Nothing was in flight: every worker stopped when asked, none had to be killed at the deadline.
    assert "did not stop" not in server.log, server.log
    assert "pytriton server stopped" in server.log
    _assert_all_gone(server, {server.process.pid, *server.worker_pids()})


@pytest.mark.slow
def test_stop_after_a_worker_was_killed_ends_in_time_repeatedly():
    exit_timeout_s = 20.0
    rng = random.Random(13)
    for _ in range(20):
        moment = f"after-{rng.choice([0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.8, 1.2, 2.0])}"
        elapsed, server = _kill_a_worker_then_stop(moment, exit_timeout_s)
        assert elapsed < exit_timeout_s, f"{moment}: stop took {elapsed:.1f} s; log:\n{server.log}"
        assert "did not stop" not in server.log, server.log
        _assert_all_gone(server, {server.process.pid, *server.worker_pids()})


def test_stop_with_a_callable_that_never_returns_ends_within_the_exit_timeout(tmp_path):
    exit_timeout_s = 2.0
    server = ServerProcess(["tests.models:slow_pid", "--exit-timeout", str(exit_timeout_s), *SLOW_PID])
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue = queue.Queue()
    tensor = grpcclient.InferInput("INPUT", [4], "FP32")
    tensor.set_data_from_numpy(np.zeros(4, dtype=np.float32))
    client.async_infer("slow_pid", [tensor], callback=lambda result, error: results.put((result, error)),
                       parameters={"sleep": "600", "started": str(tmp_path / "started")})
    wait_for_file(tmp_path / "started")  # the worker is inside the callable now
    elapsed = _stop_timed(server, exit_timeout_s)
    assert elapsed < exit_timeout_s + EXIT_SLACK_S, f"stop took {elapsed:.1f} s; log:\n{server.log}"
    result, error = results.get(timeout=10)
    assert result is None and error is not None  # the request failed, it did not hang
    assert error.status() == "StatusCode.UNAVAILABLE"
    assert "model instance 'slow_pid_0_0' was stopped" in error.message()  # an answer, not a dropped connection
    assert "killing it" in server.log
    _assert_all_gone(server, {server.process.pid, *server.worker_pids()})
    client.close()
