"""WorkerSpec: one definition, built in one place per kind of worker, through JSON for a worker's command line."""

from __future__ import annotations

import os

import pytest

from pytriton.backends.spec import WorkerSpec
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.control import ServerInfo

CONFIG = TritonModelConfig(model_name="m", inputs=[TensorSpec("IN", "FP32", (-1,))],
                           outputs=[TensorSpec("OUT", "FP32", (-1,))], max_batch_size=4, instance_count=2)
SERVER = ServerInfo(address="ipc:///tmp/r/workers.sock", tag="0123abcd", server_pid=4242, inline_max=1024)


def test_a_spawned_workers_spec_survives_its_command_line():
    spec = WorkerSpec.for_process(address="ipc:///tmp/r/workers.sock", identity="m#1#3", tag="0123abcd",
                                  inline_max=2048, config=CONFIG, callable="pkg.mod:fn", instance=1,
                                  log_level="DEBUG")
    assert (spec.server_pid, spec.watch, spec.arena_kind) == (os.getpid(), "parent", "rsp")
    assert WorkerSpec.from_json(spec.to_json()) == spec
    assert spec.label == "model 'm' instance 1"


def test_threads_of_one_process_get_their_own_arenas_and_watch_the_servers_pid():
    specs = [WorkerSpec.for_thread(SERVER, f"m#{i}#x1", CONFIG, i) for i in range(30)]
    assert len({s.arena_kind for s in specs}) == 30
    assert all(s.arena_kind.startswith("rspt") and s.arena_kind.isalpha() for s in specs)
    first = specs[0]
    assert (first.address, first.tag, first.server_pid, first.inline_max) == (SERVER.address, SERVER.tag, 4242, 1024)
    assert (first.watch, first.callable) == ("pid", None)


def test_a_newer_spec_with_more_fields_still_reads_and_a_bad_watch_is_refused():
    spec = WorkerSpec(address="a", identity="i", tag="t", server_pid=1, inline_max=0, config=CONFIG)
    text = spec.to_json()[:-1] + ', "future_field": 1}'
    assert WorkerSpec.from_json(text) == spec
    with pytest.raises(ValueError, match="WorkerSpec.watch must be one of parent, pidfd, pid, none, got 'sometimes'"):
        WorkerSpec(address="a", identity="i", tag="t", server_pid=1, inline_max=0, config=CONFIG, watch="sometimes")
