"""Triton's lifecycle: run to ready, stop, two servers in one process, RemoteTriton, import paths, and
nothing left behind when the user's process is stopped by a signal or killed."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from pytriton.exceptions import PyTritonRuntimeError
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import RemoteTriton, Triton, TritonConfig
from tests._support.paths import REPO
from tests._support.ports import FREE_PORTS
from tests._support.processes import pid_alive, started_pids
from tests.triton import models

F32 = np.float32


def segments_with_tag(tag: str) -> list[str]:
    return [e for e in os.listdir("/dev/shm") if e.startswith(f"pytriton_{tag}_")]


def infer_times(port: int, model: str, value: float) -> float:
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
    tensor = grpcclient.InferInput("values", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.array([[value]], dtype=F32))
    return float(client.infer(model, [tensor]).as_numpy("result")[0, 0])


def test_run_stop_and_a_second_server_in_the_same_process():
    first = Triton(config=TritonConfig(**FREE_PORTS))
    first.bind("times2", models.times(2), inputs=[Tensor(name="values", shape=(1,), dtype=F32)],
               outputs=[Tensor(name="result", shape=(1,), dtype=F32)])
    started = time.monotonic()
    first.run()
    assert time.monotonic() - started < 10
    assert first.is_alive()
    second = Triton(config=TritonConfig(**FREE_PORTS))
    second.bind("times4", models.times(4), inputs=[Tensor(name="values", shape=(1,), dtype=F32)],
                outputs=[Tensor(name="result", shape=(1,), dtype=F32)])
    second.run()
    try:
        assert first.ports["grpc"] != second.ports["grpc"]
        assert infer_times(first.ports["grpc"], "times2", 3) == 6
        assert infer_times(second.ports["grpc"], "times4", 3) == 12
    finally:
        assert second.stop()
    assert infer_times(first.ports["grpc"], "times2", 5) == 10  # the first one is unaffected
    info = dict(first._info)
    started_pids.add(info["pid"])
    assert first.stop()
    assert not first.stop()  # second stop is a no-op
    assert not pid_alive(info["pid"])
    assert segments_with_tag(info["tag"]) == []
    assert not os.path.exists(info["address"][len("ipc://"):])


def test_bind_with_import_path_gets_worker_processes():
    with Triton(config=TritonConfig(**FREE_PORTS)) as triton:
        triton.bind("pids", "tests.triton.models:pid_of_server_worker", inputs=[Tensor(name="x", shape=(1,),
                                                                                      dtype=F32)],
                    outputs=[Tensor(name="pid", shape=(1,), dtype=np.int64)], config=ModelConfig(batching=False))
        client = httpclient.InferenceServerClient(f"127.0.0.1:{triton.ports['http']}")
        tensor = httpclient.InferInput("x", [1], "FP32")
        tensor.set_data_from_numpy(np.ones(1, dtype=F32))
        pid = int(client.infer("pids", [tensor]).as_numpy("pid")[0])
        assert pid not in (os.getpid(), triton._info["pid"])  # a worker process of the server
        started_pids.add(pid)


def test_remote_triton_binds_into_a_running_server():
    with Triton(config=TritonConfig(**FREE_PORTS)) as server:
        token = server.get_access_token()
        url = f"http://127.0.0.1:{server.ports['http']}"
        remote = RemoteTriton(url=url, access_token=token)
        remote.bind("times3", models.times(3), inputs=[Tensor(name="values", shape=(1,), dtype=F32)],
                    outputs=[Tensor(name="result", shape=(1,), dtype=F32)])
        with remote:
            assert infer_times(server.ports["grpc"], "times3", 2) == 6
        client = httpclient.InferenceServerClient(f"127.0.0.1:{server.ports['http']}")
        assert not client.is_model_ready("times3")  # RemoteTriton.stop() unloaded its model
        # without the token the server refuses to hand out its connection
        with pytest.raises(PyTritonRuntimeError, match="403") as info:
            RemoteTriton(url=url).connect(timeout_s=5)
        assert "access_token=" in str(info.value) and "get_access_token()" in str(info.value)  # what to do about it


def start_user_program(mode: str, new_session: bool = False, env: dict[str, str] | None = None):
    process = subprocess.Popen([sys.executable, "-m", "tests.triton.serve_script", mode], cwd=REPO,
                               stdout=subprocess.PIPE, text=True, start_new_session=new_session,
                               env=None if env is None else {**os.environ, **env})
    started_pids.add(process.pid)
    line = process.stdout.readline()
    assert line.startswith("INFO "), line
    info = json.loads(line[5:])
    started_pids.add(info["pid"])
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{info['grpc_port']}")
    tensor = grpcclient.InferInput("x", [1, 3], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 3), dtype=F32))
    assert client.infer("double", [tensor]).as_numpy("y").tolist() == [[2, 2, 2]]
    big = grpcclient.InferInput("x", [1, 1 << 18], "FP32")
    big.set_data_from_numpy(np.ones((1, 1 << 18), dtype=F32))  # through shared memory both ways
    assert client.infer("double", [big]).as_numpy("y").sum() == 2 << 18
    assert segments_with_tag(info["tag"])
    return process, info


def assert_nothing_left(process, info, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while (pid_alive(info["pid"]) or segments_with_tag(info["tag"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(info["pid"]), "the server process outlived its user"
    assert segments_with_tag(info["tag"]) == []
    assert not os.path.exists(info["address"][len("ipc://"):])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_the_user_process_stops_everything(sig):
    process, info = start_user_program("serve")
    process.send_signal(sig)
    assert process.wait(30) == 0
    assert_nothing_left(process, info)


@pytest.mark.parametrize("target", ["server", "group"])
def test_user_process_stops_quickly_when_the_server_is_stopped_first(target):
    # The server gets the signal first (alone, or with the whole group as from a terminal's Ctrl-C) and exits;
    # the user's process must notice and stop without waiting for answers from a server that is gone.
    process, info = start_user_program("serve", new_session=True)
    started = time.monotonic()
    if target == "server":
        os.kill(info["pid"], signal.SIGINT)
    else:
        os.killpg(process.pid, signal.SIGINT)
    process.wait(20)
    assert time.monotonic() - started < 8
    assert_nothing_left(process, info)


def test_killed_user_process_takes_the_server_down_and_the_next_server_sweeps_its_workspace(monkeypatch):
    # A temporary directory of its own: servers that other tests start at the same time sweep the shared one. It is
    # short: the server's worker socket lives below it, and a Unix socket path has at most 107 bytes.
    tmp_path = tempfile.mkdtemp(prefix="pt-")
    monkeypatch.setattr(tempfile, "tempdir", None)  # reset after the test; it is set below
    try:
        _killed_user_process_scenario(tmp_path, monkeypatch)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _killed_user_process_scenario(tmp_path: str, monkeypatch) -> None:
    process, info = start_user_program("sleep", env={"TMPDIR": tmp_path})
    (workspace,) = glob.glob(os.path.join(tmp_path, f"pytriton-workspace-{process.pid}-*"))
    process.kill()
    process.wait(10)
    assert_nothing_left(process, info)
    assert os.path.isdir(workspace)  # the killed process could not remove it ...
    monkeypatch.setenv("TMPDIR", tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", tmp_path)
    with Triton(config=TritonConfig(**FREE_PORTS)):
        assert not os.path.exists(workspace)  # ... the next server's start-up sweep did


def test_environment_settings_reach_the_server(monkeypatch):
    monkeypatch.setenv("PYTRITON_INLINE_MAX_BYTES", "1234")
    with Triton(config=TritonConfig(**FREE_PORTS)) as triton:
        assert triton._info["inline_max"] == 1234
        triton.bind("times2", models.times(2), inputs=[Tensor(name="values", shape=(1,), dtype=F32)],
                    outputs=[Tensor(name="result", shape=(1,), dtype=F32)])
        assert infer_times(triton.ports["grpc"], "times2", 4) == 8
