"""`pytriton serve --frontend-processes 2`: two server processes behind the same gRPC and HTTP ports, seen through
tritonclient as one server (answers, health, metadata, statistics, metrics), stopped cleanly, and the combinations
the prototype cannot serve yet refused with an error naming the option."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tests._support.metrics import scrape
from tests._support.paths import REPO
from tests._support.processes import alive_after
from tests._support.serving import ServerProcess, serve, serve_on_a_taken_port, tensor_args
from tests._support.shm import shm_segments_of
from tests._support.waits import holds_within, wait_for_file

MODEL = "server_pid"
ARGS = ["tests.frontend_models:server_pid", *tensor_args("input", [("IN", "fp32", "-1")]),
        *tensor_args("output", [("OUT", "fp32", "-1"), ("SERVER", "int64", "1")]),
        "--frontend-processes", "2"]
FRONTEND_RE = re.compile(r"front-end process (\d+) started \(pid (\d+)\)")
CONNECTIONS = 24  # per protocol; the kernel spreads connections by their addresses: all on one process ~ 2**-47
REQUESTS = 3  # per connection
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]  # (grpc shares one connection among a process's channels)


def frontend_pids(server: ServerProcess) -> set[int]:
    return {int(pid) for _, pid in FRONTEND_RE.findall(server.log)}


def metric(text: str, name: str) -> float:
    match = re.search(rf'^{name}{{model="{MODEL}",version="1"}} (\S+)$', text, re.MULTILINE)
    assert match, f"{name} missing from\n{text}"
    return float(match.group(1))


def _grpc_connection(url: str, seed: int, size: int = 16) -> list[int]:
    """One new connection; REQUESTS inferences on it; the server pids that answered (the answers checked)."""
    client = grpcclient.InferenceServerClient(url, channel_args=OWN_CONNECTION)
    try:
        pids = []
        for i in range(REQUESTS):
            data = np.full(size, seed * 10 + i, dtype=np.float32)
            tensor = grpcclient.InferInput("IN", [size], "FP32")
            tensor.set_data_from_numpy(data)
            result = client.infer(MODEL, [tensor])
            np.testing.assert_array_equal(result.as_numpy("OUT"), data)
            pids.append(int(result.as_numpy("SERVER")[0]))
        return pids
    finally:
        client.close()


def _http_connection(url: str, seed: int, size: int = 16) -> list[int]:
    client = httpclient.InferenceServerClient(url)
    try:
        pids = []
        for i in range(REQUESTS):
            data = np.full(size, -(seed * 10 + i), dtype=np.float32)
            tensor = httpclient.InferInput("IN", [size], "FP32")
            tensor.set_data_from_numpy(data, binary_data=i % 2 == 0)
            result = client.infer(MODEL, [tensor])
            np.testing.assert_array_equal(result.as_numpy("OUT"), data)
            pids.append(int(result.as_numpy("SERVER")[0]))
        return pids
    finally:
        client.close()


def test_many_connections_are_answered_by_both_processes_and_seen_as_one_server():
    with serve(*ARGS) as server:
        frontends = frontend_pids(server)
        assert len(frontends) == 2, server.log
        with ThreadPoolExecutor(8) as pool:
            grpc_runs = [pool.submit(_grpc_connection, server.grpc_url, i) for i in range(CONNECTIONS)]
            http_runs = [pool.submit(_http_connection, server.http_url, i) for i in range(CONNECTIONS)]
            grpc_pids = [pid for run in grpc_runs for pid in run.result()]
            http_pids = [pid for run in http_runs for pid in run.result()]
        # every request was answered by a worker of one of the two front-end processes, and each served some, over
        # each protocol
        assert set(grpc_pids) == frontends and set(http_pids) == frontends
        total = 2 * CONNECTIONS * REQUESTS

        # statistics: the sum over both processes, whichever process answers (asked over new connections each)
        for _ in range(4):
            grpc = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
            http = httpclient.InferenceServerClient(server.http_url)
            try:
                grpc_stats = grpc.get_inference_statistics(MODEL).model_stats[0]
                http_stats = http.get_inference_statistics(MODEL)["model_stats"][0]
                all_stats = http.get_inference_statistics()["model_stats"]
            finally:
                grpc.close()
                http.close()
            assert grpc_stats.inference_count == grpc_stats.inference_stats.success.count == total
            assert http_stats["inference_count"] == http_stats["execution_count"] == total
            assert http_stats["inference_stats"]["success"]["count"] == total
            assert http_stats["inference_stats"]["fail"]["count"] == 0
            assert [s["inference_count"] for s in all_stats] == [total]
            assert http_stats["batch_stats"] == [] or http_stats["batch_stats"][0]["compute_infer"]["count"] == total

        # one metrics port, the counters summed over both processes; the machine's gauges once
        text = scrape(server)
        assert metric(text, "nv_inference_count") == total
        assert metric(text, "nv_inference_request_success") == total
        assert not re.search(r'^nv_inference_request_failure{model="server_pid".* [1-9]', text, re.MULTILINE)
        for index in (0, 1):  # each process's instance, apart
            assert re.search(rf'^pytriton_model_instance_up{{model="{MODEL}".*,frontend="{index}"}} 1$', text,
                             re.MULTILINE), text
        assert len(re.findall(r"^nv_cpu_utilization ", text, re.MULTILINE)) == 1
        assert len(re.findall(r"^# TYPE nv_inference_count ", text, re.MULTILINE)) == 1


def test_health_and_metadata_are_the_same_on_every_connection():
    with serve(*ARGS, "--id", "two-fronts") as server:
        answers = set()
        for _ in range(12):
            grpc = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
            http = httpclient.InferenceServerClient(server.http_url)
            try:
                assert grpc.is_server_live() and grpc.is_server_ready() and grpc.is_model_ready(MODEL)
                assert http.is_server_live() and http.is_server_ready() and http.is_model_ready(MODEL)
                meta = http.get_server_metadata()
                model = grpc.get_model_metadata(MODEL)
                answers.add((meta["name"], meta["version"], grpc.get_server_metadata().name,
                             tuple(o.name for o in model.outputs), http.get_model_config(MODEL)["max_batch_size"]))
                with pytest.raises(InferenceServerException, match="not found|unknown model"):
                    http.get_model_metadata("no_such_model")
            finally:
                grpc.close()
                http.close()
        assert answers == {("two-fronts", answers.copy().pop()[1], "two-fronts", ("OUT", "SERVER"), 0)}


def test_settings_that_each_process_holds_cannot_be_changed():
    with serve(*ARGS) as server:
        http = httpclient.InferenceServerClient(server.http_url)
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        with pytest.raises(InferenceServerException, match="several front-end processes"):
            http.update_log_settings({"log_verbose_level": 1})
        with pytest.raises(InferenceServerException, match="--frontend-processes"):
            grpc.update_trace_settings(settings={"trace_rate": "5"})
        assert http.get_log_settings()["log_verbose_level"] == 0
        # a RemoteTriton would bind its models to one process only: it is told why it cannot join
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://{server.http_url}/v2/pytriton/connection", timeout=10)
        assert refused.value.code == 501 and "--frontend-processes" in refused.value.read().decode()


def test_stop_ends_every_process_and_leaves_no_shared_memory():
    server = ServerProcess(ARGS)
    try:
        for seed in range(8):  # 1 MiB tensors: they travel in shared memory (arenas of both processes)
            _grpc_connection(server.grpc_url, seed, size=1 << 18)
            _http_connection(server.http_url, seed, size=1 << 18)
        ours = frontend_pids(server) | set(server.worker_pids())
        assert len(ours) == 4, server.log  # two front-end processes, a worker each
        assert shm_segments_of(ours)  # (their request and response arenas exist while they serve)
    finally:
        code = server.stop()
    assert code == 0, server.log
    assert not alive_after(ours, 20.0)
    assert not shm_segments_of(ours)
    assert server.log.count("pytriton server stopped") == 3  # each process, then the group


def test_a_front_end_process_that_dies_stops_the_group_cleanly():
    server = ServerProcess(ARGS)
    try:
        ours = frontend_pids(server) | set(server.worker_pids())
        victim = {int(pid) for index, pid in FRONTEND_RE.findall(server.log) if index == "1"}.pop()
        os.kill(victim, signal.SIGKILL)
        server.process.wait(60)
    finally:
        code = server.stop()
    assert code != 0
    assert f"front-end process 1 (pid {victim}) exited with code -9" in server.log
    assert not alive_after(ours, 20.0)  # the other process and both workers (the dead one's workers see their server go)
    assert not shm_segments_of(ours)  # the dead process's segments swept by the group


@pytest.mark.parametrize("args, reason", [
    (["--model-repository", str(REPO / "tests" / "repositories" / "models"), "--model-control-mode", "explicit"],
     "--model-control-mode explicit"),
    (["--metrics-config", "summary_latencies=true"], "quantiles"),
    (["--trace-config", "level=TIMESTAMPS"], "--trace-config"),
])
def test_combinations_not_served_yet_are_refused(args, reason):
    command = [sys.executable, "-m", "pytriton.cli", "serve", *ARGS, *args, "--grpc-port", "0", "--http-port", "0",
               "--metrics-port", "0"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    assert "Invalid value for --frontend-processes: 2 processes:" in result.stderr
    assert reason in result.stderr


def test_sequence_batching_is_refused():
    command = [sys.executable, "-m", "pytriton.cli", "serve", "tests.sequence_models:running_sum",
               *tensor_args("input", [("INPUT", "int32", "1")]), *tensor_args("output", [("SUM", "int32", "1")]),
               "--max-batch-size", "2", "--sequence-batching", "direct", "--sequence-control", "start=START:bool",
               "--frontend-processes", "2"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    assert "--frontend-processes" in result.stderr and "uses sequence batching" in result.stderr


def test_a_taken_port_is_named():
    result, port = serve_on_a_taken_port(*ARGS, "--grpc-address", "127.0.0.1", "--grpc-port", "{port}",
                                         "--http-port", "0", "--metrics-port", "0")
    assert result.returncode != 0
    assert f"cannot listen for gRPC on 127.0.0.1:{port}" in result.stderr


def test_a_region_registered_through_one_connection_serves_requests_on_every_process():
    """Registered over one gRPC connection, used for inputs and outputs by requests over new connections (both
    processes), listed by every process, unregistered over HTTP from every process at once."""
    size = 16 * 4
    name = f"pt_fe_{os.getpid()}"
    inputs = shm.create_shared_memory_region(f"{name}_in", f"/{name}_in", size)
    outputs = shm.create_shared_memory_region(f"{name}_out", f"/{name}_out", size + 8)
    try:
        with serve(*ARGS) as server:
            grpc = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
            grpc.register_system_shared_memory(f"{name}_in", f"/{name}_in", size)
            grpc.register_system_shared_memory(f"{name}_out", f"/{name}_out", size + 8)
            with pytest.raises(InferenceServerException, match="already in manager"):
                grpc.register_system_shared_memory(f"{name}_in", f"/{name}_in", size)
            grpc.close()
            seen = set()
            for i in range(16):
                data = np.full(16, i, dtype=np.float32)
                shm.set_shared_memory_region(inputs, [data])
                client = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
                try:
                    tensor = grpcclient.InferInput("IN", [16], "FP32")
                    tensor.set_shared_memory(f"{name}_in", size)
                    out = grpcclient.InferRequestedOutput("OUT")
                    out.set_shared_memory(f"{name}_out", size)
                    pid = grpcclient.InferRequestedOutput("SERVER")
                    pid.set_shared_memory(f"{name}_out", 8, offset=size)
                    client.infer(MODEL, [tensor], outputs=[out, pid])
                finally:
                    client.close()
                np.testing.assert_array_equal(shm.get_contents_as_numpy(outputs, np.float32, [16]), data)
                seen.add(int(shm.get_contents_as_numpy(outputs, np.int64, [1], offset=size)[0]))
                http = httpclient.InferenceServerClient(server.http_url)
                try:
                    assert {r["name"] for r in http.get_system_shared_memory_status()} == {f"{name}_in", f"{name}_out"}
                finally:
                    http.close()
            assert seen == frontend_pids(server)
            httpclient.InferenceServerClient(server.http_url).unregister_system_shared_memory()
            for _ in range(8):
                client = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
                try:
                    assert not client.get_system_shared_memory_status().regions
                finally:
                    client.close()
    finally:
        for handle in (inputs, outputs):
            shm.destroy_shared_memory_region(handle)


def test_a_killed_group_leaves_nothing_behind():
    """SIGKILL of the `pytriton serve` process: its front-end processes see their parent gone and stop, with their
    workers and their shared memory."""
    server = ServerProcess(ARGS)
    try:
        for seed in range(4):
            _http_connection(server.http_url, seed, size=1 << 18)
        ours = frontend_pids(server) | set(server.worker_pids())
        assert len(ours) == 4, server.log
        server.process.kill()
        server.process.wait(10)
        assert not alive_after(ours, 40.0)
        assert not shm_segments_of(ours)
    finally:
        server.stop()


def test_a_second_signal_stops_without_waiting_for_requests_in_flight(tmp_path):
    """The first SIGINT drains; the second is passed on to the front-end processes, which then stop waiting for
    the request in flight (as one server given two signals does: its worker is stopped, the request fails)."""
    args = ["tests.models:gated_pid", *tensor_args("input", [("X", "int32", "1")]),
            *tensor_args("output", [("PID", "int64", "1")]), "--frontend-processes", "2", "--exit-timeout", "4"]
    server = ServerProcess(args)
    started, never = tmp_path / "started", tmp_path / "never"
    failures: list[str] = []

    def gated() -> None:
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            x = grpcclient.InferInput("X", [1], "INT32")
            x.set_data_from_numpy(np.array([1], dtype=np.int32))
            try:  # (the model waits 30 s for a release file that never comes)
                client.infer("gated_pid", [x], parameters={"started": str(started), "release": str(never)},
                             client_timeout=60)
            except InferenceServerException as exc:
                failures.append(str(exc))

    with ThreadPoolExecutor(1) as pool:
        try:
            call = pool.submit(gated)
            wait_for_file(started)
            server.process.send_signal(signal.SIGINT)
            assert server.wait_for_log("signal received; stopping 2 front-end processes")
            server.process.send_signal(signal.SIGINT)
            server.process.wait(30)
            call.result(timeout=30)
            assert len(failures) == 1, (failures, server.log)  # (the model would have answered after 30 s)
            log = server.log
            passed_on = log.index("second signal: the front-end processes stop without waiting")
            assert log.index("second signal: not waiting for in-flight requests any longer") > passed_on
        finally:
            server.stop()


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _owner_of(worker: int, server) -> int:
    """The front-end process that owns `worker`: its parent, or the parent of the worker template that forked it."""
    parent = _parent_of(worker)
    return _parent_of(parent) if parent in server.template_pids() else parent


def test_a_worker_that_dies_is_restarted_by_its_own_process_and_the_group_serves_on():
    with serve(*ARGS) as server:
        frontends = {int(index): int(pid) for index, pid in FRONTEND_RE.findall(server.log)}
        victim = next(pid for pid in server.worker_pids() if _owner_of(pid, server) == frontends[1])
        os.kill(victim, signal.SIGKILL)
        assert server.wait_for_log(f"(pid {victim})")
        assert holds_within(lambda: server.log.count("model instance 'server_pid_0_0' started") >= 3), server.log
        assert server.log.count("model instance 'server_pid_0_0' started") == 3, server.log
        with ThreadPoolExecutor(4) as pool:
            runs = [pool.submit(_http_connection, server.http_url, i) for i in range(CONNECTIONS)]
            assert {pid for run in runs for pid in run.result()} == set(frontends.values())
        text = scrape(server)
        assert re.search(r'^pytriton_model_instance_restarts{.*frontend="1"} 1$', text, re.MULTILINE), text
        assert re.search(r'^pytriton_model_instance_restarts{.*frontend="0"} 0$', text, re.MULTILINE), text
        assert server.process.poll() is None  # the group goes on
