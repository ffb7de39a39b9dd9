"""Stopping `pytriton serve --model-repository --model-control-mode explicit` (SIGINT or SIGTERM) while a reload is in
progress: the new instance is still in `initialize` and a client's load request waits for it. The server stops within
its exit timeout, every worker process exits, `finalize` runs for each instance whose `initialize` completed (as
Triton finalizes only initialized instances), nothing is left in /dev/shm, and the load request gets an error instead
of hanging."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests._support.processes import pid_alive
from tests._support.serving import ServerProcess
from tests._support.shm import shm_segments_of
from tests._support.waits import holds_within

EXIT_TIMEOUT_S = 4.0

CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

# Each instance notes its life in events.log beside config.pbtxt; while a file `hold` is there, initialize waits
# (up to 30 s) for it to go, so the test holds a reload in initialize as long as it likes.
MODEL = """
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.folder = args["model_repository"]
        self.note("initialize-start")
        deadline = time.monotonic() + 30
        while os.path.exists(os.path.join(self.folder, "hold")) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.note("initialize-done")

    def note(self, event):
        with open(os.path.join(self.folder, "events.log"), "a") as f:
            f.write(f"{event} {os.getpid()}\\n")

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", r.get_input_tensor_by_name("X").as_numpy())])
                for r in requests]

    def finalize(self):
        self.note("finalize")
"""


def events(model_dir: Path) -> list[tuple[str, int]]:
    log = model_dir / "events.log"
    if not log.exists():
        return []
    return [(e, int(p)) for e, p in (line.split() for line in log.read_text().splitlines())]


@pytest.mark.parametrize("sig,protocol", [(signal.SIGINT, "http"), (signal.SIGTERM, "grpc")])
def test_stop_while_a_reload_is_in_initialize(tmp_path, sig, protocol):
    model_dir = tmp_path / "gate"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(CONFIG)
    (model_dir / "1" / "model.py").write_text(MODEL)
    server = ServerProcess(["--model-repository", str(tmp_path), "--model-control-mode", "explicit",
                            "--load-model", "gate", "--exit-timeout", str(EXIT_TIMEOUT_S)])
    try:
        [(_, first)] = [e for e in events(model_dir) if e[0] == "initialize-done"]
        (model_dir / "hold").touch()
        client = (httpclient.InferenceServerClient(server.http_url, network_timeout=60) if protocol == "http"
                  else grpcclient.InferenceServerClient(server.grpc_url))
        outcome: dict[str, BaseException | None] = {}

        def load() -> None:
            try:
                client.load_model("gate")
                outcome["error"] = None
            except BaseException as exc:  # noqa: BLE001 (whatever the client raises is the outcome)
                outcome["error"] = exc

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        assert holds_within(lambda: len([e for e in events(model_dir) if e[0] == "initialize-start"]) == 2), \
            f"the reload did not start; log:\n{server.log}"
        second = [p for e, p in events(model_dir) if e == "initialize-start"][1]
        pids = {server.process.pid, *server.worker_pids(), second}  # (its "started" line comes after initialize)
        assert first in pids

        t0 = time.monotonic()
        server.process.send_signal(sig)
        code = server.process.wait(EXIT_TIMEOUT_S + 10)
        stopped_after = time.monotonic() - t0
    finally:
        (model_dir / "hold").unlink(missing_ok=True)
        server.stop()
    assert code == 0, f"exit status {code}; log:\n{server.log}"
    assert stopped_after <= EXIT_TIMEOUT_S + 5, f"stopped after {stopped_after:.1f} s; log:\n{server.log}"

    loader.join(15)
    assert not loader.is_alive(), "the load request still waits after the server stopped"
    error = outcome["error"]
    assert error is not None, "the load request succeeded although the server stopped during it"
    assert "failed to load 'gate': the server is stopping" in str(error), repr(error)
    assert "did not stop within the exit timeout" not in server.log, server.log

    assert holds_within(lambda: not any(pid_alive(p) for p in pids), 10), \
        f"processes left: {[p for p in pids if pid_alive(p)]}"
    assert shm_segments_of(pids) == []
    seen = events(model_dir)
    assert ("finalize", first) in seen, seen  # the serving instance was finalized
    for pid in (first, second):  # finalize exactly for instances whose initialize completed
        assert (("initialize-done", pid) in seen) == (("finalize", pid) in seen), seen
