"""Poll mode (`--model-control-mode poll`): a reload whose new worker dies before it is ready is tried again on a
later poll without any edit of the model's files, the version served serving on meanwhile and the log saying so; the
tries back off (doubling from one poll interval, at most RETRY_MAX_S). End to end with tritonclient, and with a fake
core and clock for the schedule."""

from __future__ import annotations

import asyncio
import types
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from pytriton.core.registry import Model, ModelRegistry
from pytriton.repository import control as repository_control
from pytriton.repository.control import ModelControl
from tests._support.serving import serve

CONFIG = """
name: "flaky"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

MODEL = """
import os

import triton_python_backend_utils as pb_utils

CRASH = {crash!r}  # (outside the model's folder: creating or removing it is no edit of the model)
FACTOR = {factor}


class TritonPythonModel:
    def initialize(self, args):
        if os.path.exists(CRASH):  # the worker fails, and exits, before it is ready
            raise RuntimeError("the crash file is there")

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
                                                            * FACTOR)]) for r in requests]
"""


def write_model(repo: Path, crash: Path, factor: float) -> None:
    (repo / "flaky" / "1").mkdir(parents=True, exist_ok=True)
    (repo / "flaky" / "config.pbtxt").write_text(CONFIG)
    (repo / "flaky" / "1" / "model.py").write_text(MODEL.format(crash=str(crash), factor=factor))


def scale(client: httpclient.InferenceServerClient) -> list[float]:
    x = httpclient.InferInput("X", [1], "FP32")
    x.set_data_from_numpy(np.array([1.0], dtype=np.float32))
    return client.infer("flaky", [x]).as_numpy("Y").tolist()


def test_a_reload_whose_worker_dies_is_tried_again_without_an_edit(tmp_path: Path) -> None:
    repo, crash = tmp_path / "repo", tmp_path / "crash"
    write_model(repo, crash, 2.0)
    with serve("--model-repository", str(repo), "--model-control-mode", "poll",
               "--repository-poll-secs", "1") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert scale(client) == [2.0]
        crash.touch()
        write_model(repo, crash, 3.0)  # the edit: its reload's worker dies (the crash file exists)
        assert server.wait_for_log("load failed for model 'flaky'", 60), server.log
        assert scale(client) == [2.0] and client.is_model_ready("flaky") and client.is_server_ready()  # serves on
        crash.unlink()  # no edit of the model: only a later try can load it now
        assert server.wait_for_log("model 'flaky' version 1 ready in place of version 1", 60), server.log
        assert scale(client) == [3.0]
        log = server.log
        assert "RuntimeError: the crash file is there" in log
        assert "version 1 serves on; trying again in 1 s (no edit needed)" in log
        assert "model repository poll: trying model 'flaky' again (its instances failed to start" in log


class CrashingCore:
    """The core's model operations for ModelControl; every start fails while `crash` is set."""

    def __init__(self) -> None:
        self.registry = ModelRegistry()
        self.crash = True
        self.starts = 0

    async def replace_model(self, config, source, timeout_s):
        self.starts += 1
        if self.crash:
            raise RuntimeError("model instance 'flaky_0_0' failed to start: worker exited with code 3")
        scheduler = types.SimpleNamespace(ready=True)
        self.registry.replace(Model(config=config, scheduler=scheduler, source=source, loaded=True))  # type: ignore


def test_the_tries_back_off_and_an_edit_starts_over(tmp_path: Path) -> None:
    write_model(tmp_path, tmp_path / "unused", 2.0)
    core = CrashingCore()
    control = ModelControl(core, types.SimpleNamespace(worker_pool=lambda config, target: target),  # type: ignore
                           [str(tmp_path)], "poll", poll_secs=1)
    now = [100.0]
    control._clock = lambda: now[0]

    async def poll_at(t: float) -> int:
        now[0] = t
        before = core.starts
        await control._poll_once()
        return core.starts - before

    async def scenario() -> None:
        assert await poll_at(100) == 1  # the first load fails: next try one poll later
        assert await poll_at(100.5) == 0
        assert await poll_at(101) == 1  # 2nd failure: 2 s
        assert await poll_at(102.9) == 0
        assert await poll_at(103) == 1  # 3rd: 4 s
        assert await poll_at(106.9) == 0
        assert await poll_at(107) == 1
        write_model(tmp_path, tmp_path / "unused", 5.0)  # an edit is tried at once, and the backoff starts over
        assert await poll_at(107.5) == 1
        assert await poll_at(108.5) == 1
        core.crash = False
        assert await poll_at(110.5) == 1
        assert core.registry.find("flaky") is not None
        assert await poll_at(1000) == 0  # loaded: nothing more to try

    asyncio.run(scenario())


def test_the_delay_is_bounded() -> None:
    retry_delay, RETRY_MAX_S = repository_control.retry_delay, repository_control.RETRY_MAX_S
    assert [retry_delay(15, n) for n in (1, 2, 3, 4, 5, 6, 100)] == [15, 30, 60, 120, 240, RETRY_MAX_S, RETRY_MAX_S]
    assert retry_delay(1000, 7) == 1000  # polls rarer than the bound: one poll apart
