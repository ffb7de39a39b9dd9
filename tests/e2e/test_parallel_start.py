"""Models of their own start side by side at `pytriton serve`: two repository models whose initialize() each waits
for the other's to have begun start together (one after the other, the first would wait in vain and fail)."""

from __future__ import annotations

import os

import pytest

from tests._support.serving import serve

GATE_S = 30  # how long an initialize() waits for the other model's to begin before it fails

MODEL = """import os
import time

OTHER = {other!r}


class TritonPythonModel:
    def initialize(self, args):
        gates = os.path.join(args["model_repository"], "..")
        open(os.path.join(gates, {name!r} + ".began"), "w").close()
        deadline = time.monotonic() + {gate}
        while not os.path.exists(os.path.join(gates, OTHER + ".began")):
            if time.monotonic() > deadline:
                raise RuntimeError("model " + OTHER + " did not begin to initialize meanwhile")
            time.sleep(0.01)

    def execute(self, requests):
        return []
"""

CONFIG = """backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="models start one at a time on one core")
def test_two_models_initialize_at_the_same_time(tmp_path):
    repository = tmp_path / "repository"
    for name, other in (("first", "second"), ("second", "first")):
        (repository / name / "1").mkdir(parents=True)
        (repository / name / "config.pbtxt").write_text(CONFIG)
        (repository / name / "1" / "model.py").write_text(MODEL.format(name=name, other=other, gate=GATE_S))
    with serve("--model-repository", str(repository), "--disable-auto-complete-config") as server:
        assert "model 'first' version 1 ready" in server.log
        assert "model 'second' version 1 ready" in server.log
    assert (repository / "first.began").exists() and (repository / "second.began").exists()
