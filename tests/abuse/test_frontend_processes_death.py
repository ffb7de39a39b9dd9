"""Attacks on `pytriton serve --frontend-processes 2` (docs/multi-frontend.md): a front-end process killed (SIGKILL)
while requests are in flight on both processes and while a shared-memory registration waits for it. The group must
stop with exit code 1 naming the process, leave no process (workers included), no /dev/shm segment of ours, and
free ports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tests._support.paths import REPO
from tests._support.processes import pid_alive
from tests._support.serving import ServerProcess, tensor_args
from tests._support.shm import shm_segments_of
from tests._support.waits import holds_within
from tests.abuse._frontend_group import FRONTEND_RE, OWN_CONNECTION, PEER_RE, connections_to

ARGS = ["tests.models:gated_pid", *tensor_args("input", [("X", "int32", "1")]),
        *tensor_args("output", [("PID", "int64", "1")]), "--frontend-processes", "2", "--exit-timeout", "10"]


def _gated(server: ServerProcess, started: str, release: str, protocol: str) -> str:
    """One gated request on a new connection: 'answered by PID' (the worker that ran it), 'answered without PID' (a
    success that carries no output: never right) or the client's error.

    The pid tells whose worker answered: gRPC retries a call that a server closing its connection never started on
    a new connection (transparent retry), and once the group has freed its port another server of the test run
    may be listening there (its gate times out after 30 s and it answers)."""
    try:
        if protocol == "grpc":
            client = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
            x = grpcclient.InferInput("X", [1], "INT32")
            x.set_data_from_numpy(np.array([1], dtype=np.int32))
            answer = client.infer("gated_pid", [x], parameters={"started": started, "release": release},
                                  client_timeout=60)
        else:
            client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
            x = httpclient.InferInput("X", [1], "INT32")
            x.set_data_from_numpy(np.array([1], dtype=np.int32))
            answer = client.infer("gated_pid", [x], parameters={"started": started, "release": release})
        client.close()
        pid = answer.as_numpy("PID")
        return "answered without PID" if pid is None else f"answered by {int(pid.reshape(-1)[0])}"
    except Exception as exc:  # noqa: BLE001 - any way the call ends is a result (a closed connection, too)
        return f"error: {exc}"


def _answered_by(results: list[str], pids: set[int]) -> list[str]:
    """The results of `_gated` that a worker among `pids` answered, and any success without an output."""
    return [r for r in results
            if r == "answered without PID" or (r.startswith("answered by ") and int(r.rsplit(" ", 1)[1]) in pids)]


def _bindable(port: int) -> bool:
    """Whether a new server could listen on `port` now (no SO_REUSEPORT: any socket of ours left would refuse)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
    return True


def test_a_front_end_process_killed_mid_traffic_and_mid_registration_stops_the_group_cleanly(tmp_path):
    server = ServerProcess(ARGS)
    name = f"pt_fe_kill_{os.getpid()}"
    region = shm.create_shared_memory_region(name, f"/{name}", 64)
    release = str(tmp_path / "release")
    try:
        frontends = {int(i): int(p) for i, p in FRONTEND_RE.findall(server.log)}
        ports = [server.ports["GRPCInferenceService"], server.ports["HTTPService"], server.ports["Metrics Service"],
                 *(int(p) for _, p in PEER_RE.findall(server.log))]
        ours = set(frontends.values()) | set(server.worker_pids())
        assert len(ours) == 4, server.log
        with ThreadPoolExecutor(16) as pool:
            # requests in flight on both processes: each worker runs one at a time, so two started files mean
            # both workers (one per process) are inside a request; more wait in the queues
            calls = [pool.submit(_gated, server, str(tmp_path / f"started{i}"), release, ("grpc", "http")[i % 2])
                     for i in range(12)]
            assert holds_within(lambda: len(list(tmp_path.glob("started*"))) >= 2), server.log
            # a registration through process 0 waiting for process 1's answer: process 1 is stopped first
            os.kill(frontends[1], signal.SIGSTOP)
            registration: list[str] = []

            def register() -> None:
                for _ in range(20):  # (a new connection until one reaches process 0)
                    client = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
                    try:
                        if not client.is_server_live(client_timeout=2):
                            continue
                        client.register_system_shared_memory(name, f"/{name}", 64, client_timeout=30)
                        registration.append("registered")
                    except InferenceServerException as exc:
                        if "DEADLINE_EXCEEDED" in str(exc) and not registration:
                            continue
                        registration.append(str(exc))
                    finally:
                        client.close()
                    return

            registering = threading.Thread(target=register)
            registering.start()
            peer1 = int(dict(PEER_RE.findall(server.log))["1"])
            # process 0's order waits in process 1's queue
            assert holds_within(lambda: connections_to(peer1) > 0), server.log
            os.kill(frontends[1], signal.SIGKILL)
            with open(release, "w"):
                pass
            assert server.process.wait(60) == 1
            registering.join(60)
            results = [call.result(timeout=60) for call in calls]
        assert _answered_by(results, ours) and "answered without PID" not in results, results  # process 0 drained
        assert f"front-end process 1 (pid {frontends[1]}) exited with code -9" in server.log
        assert registration, "the registration never ended"
        gone = holds_within(lambda: not any(pid_alive(pid) for pid in ours), 30)
        assert gone, [pid for pid in ours if pid_alive(pid)]  # the dead process's worker too
        assert not shm_segments_of(ours)
        assert all(_bindable(port) for port in ports), [p for p in ports if not _bindable(p)]
    finally:
        for pid in {int(p) for _, p in FRONTEND_RE.findall(server.log)}:
            if pid_alive(pid):
                os.kill(pid, signal.SIGCONT)
        server.stop()
        shm.destroy_shared_memory_region(region)


@pytest.mark.parametrize("first, second", [(signal.SIGTERM, signal.SIGTERM), (signal.SIGINT, signal.SIGTERM)])
def test_two_signals_at_once_stop_the_group_without_waiting_and_leave_nothing(tmp_path, first, second):
    """Two signals sent back to back while requests are in flight on both processes: the group stops within the
    exit timeout (a worker busy in the model's code gets it, as with one process; two identical signals may also
    arrive as one), every process and segment gone, the ports free."""
    server = ServerProcess([*ARGS[:-2], "--exit-timeout", "4"])
    never = str(tmp_path / "never")
    try:
        ours = {int(p) for _, p in FRONTEND_RE.findall(server.log)} | set(server.worker_pids())
        ports = [server.ports["GRPCInferenceService"], server.ports["HTTPService"], server.ports["Metrics Service"],
                 *(int(p) for _, p in PEER_RE.findall(server.log))]
        with ThreadPoolExecutor(8) as pool:
            calls = [pool.submit(_gated, server, str(tmp_path / f"started{i}"), never, ("grpc", "http")[i % 2])
                     for i in range(8)]
            assert holds_within(lambda: len(list(tmp_path.glob("started*"))) >= 2), server.log
            started = time.monotonic()
            server.process.send_signal(first)
            server.process.send_signal(second)
            code = server.process.wait(40)
            assert time.monotonic() - started < 15, server.log  # (not the model's 30 s)
            results = [call.result(timeout=60) for call in calls]
        assert code == 0, server.log
        assert not _answered_by(results, ours), results
        assert holds_within(lambda: not any(pid_alive(pid) for pid in ours), 30), [p for p in ours if pid_alive(p)]
        assert not shm_segments_of(ours)
        assert all(_bindable(port) for port in ports)
    finally:
        server.stop()


def test_a_killed_group_parent_frees_every_port_and_leaves_nothing(tmp_path):
    """SIGKILL of the `pytriton serve` process while requests are in flight on both processes: the front-end
    processes (exit_with_parent) and their workers go, with their shared memory, and every port is free again."""
    server = ServerProcess([*ARGS[:-2], "--exit-timeout", "4"])
    try:
        ours = {int(p) for _, p in FRONTEND_RE.findall(server.log)} | set(server.worker_pids())
        ports = [server.ports["GRPCInferenceService"], server.ports["HTTPService"], server.ports["Metrics Service"],
                 *(int(p) for _, p in PEER_RE.findall(server.log))]
        with ThreadPoolExecutor(8) as pool:
            calls = [pool.submit(_gated, server, str(tmp_path / f"started{i}"), str(tmp_path / "never"),
                                 ("grpc", "http")[i % 2]) for i in range(8)]
            assert holds_within(lambda: len(list(tmp_path.glob("started*"))) >= 2), server.log
            server.process.kill()
            server.process.wait(10)
            assert holds_within(lambda: not any(pid_alive(pid) for pid in ours), 40), [p for p in ours if pid_alive(p)]
            results = [call.result(timeout=60) for call in calls]
        assert not _answered_by(results, ours), results
        assert not shm_segments_of(ours)
        assert all(_bindable(port) for port in ports), [p for p in ports if not _bindable(p)]
    finally:
        server.stop()


SLOW_INIT_CONFIG = """name: "slow_init"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""
SLOW_INIT_MODEL = """import os, time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):  # (signals its start with a file, then takes up to 40 s)
        open(os.environ["SLOW_INIT_STARTED"] + f".{os.getpid()}", "w").close()
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            time.sleep(0.02)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
                for r in requests]
"""


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_signal_while_models_load_stops_the_group_at_once(tmp_path, processes):
    """SIGINT while every process is still loading a slow model: the group stops then, as one server does, instead
    of waiting for the models to finish loading (here 40 s)."""
    (tmp_path / "repo" / "slow_init" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "slow_init" / "config.pbtxt").write_text(SLOW_INIT_CONFIG)
    (tmp_path / "repo" / "slow_init" / "1" / "model.py").write_text(SLOW_INIT_MODEL)
    env = dict(os.environ, SLOW_INIT_STARTED=str(tmp_path / "init_started"), PYTRITON_EXIT_WITH_PARENT="1")
    command = [sys.executable, "-m", "pytriton.cli", "serve", "--model-repository", str(tmp_path / "repo"),
               "--frontend-processes", processes, "--exit-timeout", "3",
               *(a for service in ("grpc", "http", "metrics") for a in (f"--{service}-port", "0"))]
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert holds_within(lambda: len(list(tmp_path.glob("init_started.*"))) == int(processes), 60)
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            pass
        assert process.returncode is not None and time.monotonic() - started < 15, "still starting after SIGINT"
        workers = {int(f.name.split(".")[-1]) for f in tmp_path.glob("init_started.*")}
        assert holds_within(lambda: not any(pid_alive(pid) for pid in workers), 20)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
