"""config.pbtxt `model_warmup`, as Triton 2.51 runs it: each instance runs every sample (`count` executions of
`batch_size` requests sharing one set of data) after initialize() and before the model is ready; a failed sample fails
the load with Triton's words and the server serves on.

The model (tests/repositories/warmup_record/model.py) writes each execution down; the expected executions below are
what the same model and config wrote on the real tritonserver 2.51 (random data compared by shape and sharing only).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._support.paths import REPO
from tests._support.serving import serve

RECORDER = REPO / "tests" / "repositories" / "warmup_record" / "model.py"
TENSORS = """
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""
SAMPLES = """
model_warmup [
  { name: "zeros" batch_size: 2 count: 2
    inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } }
    inputs { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } } },
  { name: "file" batch_size: 1
    inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 3 ] input_data_file: "in0.bin" } }
    inputs { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 1 ] input_data_file: "in1.bin" } } },
  { name: "rand" batch_size: 3
    inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 3 ] random_data: true } }
    inputs { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 4 ] random_data: true } } }
]
"""


def stage(root: Path, name: str, config: str, log: Path) -> Path:
    """A model folder `root/name` running the recording model, its log `log`; the warm-up files in `warmup/`."""
    model = root / name
    (model / "1").mkdir(parents=True)
    (model / "warmup").mkdir()
    shutil.copy(RECORDER, model / "1" / "model.py")
    np.arange(6, dtype=np.float32).tofile(model / "warmup" / "in0.bin")  # (longer than needed: the first 3 are used)
    np.array([7, 8], dtype=np.int32).tofile(model / "warmup" / "in1.bin")
    (model / "config.pbtxt").write_text(f'backend: "python"\n{config}\nparameters {{ key: "log" value: {{ '
                                        f'string_value: "{log}" }} }}\n')
    return model


def events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def request(input0: list, input1: list, shape1: list[int]) -> dict:
    return {"inputs": {"INPUT0": {"shape": [1, 3], "dtype": "float32", "data": input0},
                       "INPUT1": {"shape": shape1, "dtype": "int32", "data": input1}},
            "id": "", "requested": ["OUTPUT0"], "flags": 0}


ZEROS = request([[0.0, 0.0, 0.0]], [[0, 0]], [1, 2])
FROM_FILE = request([[0.0, 1.0, 2.0]], [[7]], [1, 1])


def test_each_instance_runs_every_sample_before_the_model_is_ready_as_triton_does(tmp_path):
    log = tmp_path / "executions.log"
    stage(tmp_path / "repo", "rec", TENSORS + 'instance_group [ { kind: KIND_CPU count: 2 } ]' + SAMPLES, log)
    with serve("--model-repository", str(tmp_path / "repo")) as server:
        seen = events(log)  # (all written before the server said it is ready)
        for instance in ("rec_0_0", "rec_0_1"):
            mine = [e for e in seen if e.get("init") == instance or e.get("instance") == instance]
            assert [e.get("init") or len(e["requests"]) for e in mine] == [instance, 2, 2, 1, 3]
            assert mine[1]["requests"] == mine[2]["requests"] == [ZEROS, ZEROS]
            assert mine[3]["requests"] == [FROM_FILE]
            randoms = mine[4]["requests"]
            assert [(r["inputs"]["INPUT0"]["shape"], r["inputs"]["INPUT1"]["shape"]) for r in randoms] == [
                ([1, 3], [1, 4])] * 3
            assert randoms[0] == randoms[1] == randoms[2]  # (one set of data for the sample's requests)
        assert len(seen) == 10

        client = grpcclient.InferenceServerClient(server.grpc_url)
        config = client.get_model_config("rec", as_json=True)["config"]
        assert [(s["name"], s["batch_size"], s.get("count", 0)) for s in config["model_warmup"]] == [
            ("zeros", 2, 2), ("file", 1, 0), ("rand", 3, 0)]
        assert config["model_warmup"][1]["inputs"]["INPUT0"]["input_data_file"] == "in0.bin"
        inputs = [grpcclient.InferInput("INPUT0", [1, 3], "FP32"), grpcclient.InferInput("INPUT1", [1, 1], "INT32")]
        inputs[0].set_data_from_numpy(np.ones((1, 3), np.float32))
        inputs[1].set_data_from_numpy(np.ones((1, 1), np.int32))
        client.infer("rec", inputs)
        assert len(events(log)) == 11  # the warm-up ran once per instance, not again
        stats = client.get_inference_statistics("rec", as_json=True)["model_stats"][0]
        # Triton 2.51 counts the warm-up in the model's statistics: 2 instances x (2 + 2 + 1 + 3) requests in 2 x 4
        # executions (batch_stats keyed by the execution's request count), then this request
        assert (int(stats["inference_count"]), int(stats["execution_count"])) == (17, 9)
        assert int(stats["inference_stats"]["success"]["count"]) == 17
        assert {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]} == {
            1: 3, 2: 4, 3: 2}


FAILURES = [
    ('parameters { key: "fail" value: { string_value: "warm-up refused" } }\n' + TENSORS.replace("-1", "2")
     + 'model_warmup [ { name: "w1" batch_size: 1 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 3 ] '
       'zero_data: true } } inputs { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } } } ]',
     "failed to run warmup sample 'w1': Failed to process the request(s) for model 'bad_0_0', message: "
     "TritonModelException: warm-up refused; "),
    (TENSORS + 'model_warmup [ { name: "w" batch_size: 5 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 '
               'dims: [ 3 ] zero_data: true } } inputs { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 2 ] '
               'zero_data: true } } } ]',
     "failed to run warmup sample 'w': " + "batch size 5 for 'bad_0_0', max allowed is 4; " * 5),
]


@pytest.mark.parametrize(("config", "message"), FAILURES, ids=["model-raises", "batch-too-large"])
def test_a_failed_warmup_refuses_the_start_in_tritons_words(tmp_path, config, message):
    stage(tmp_path / "repo", "bad", config, tmp_path / "executions.log")
    command = [sys.executable, "-m", "pytriton.cli", "serve", "--model-repository", str(tmp_path / "repo")]
    for service in ("grpc", "http", "metrics"):
        command += [f"--{service}-port", "0", f"--{service}-address", "127.0.0.1"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert message in result.stderr
    assert "server ready" not in result.stderr


def test_a_failed_warmup_fails_an_explicit_load_and_the_server_serves_on(tmp_path):
    stage(tmp_path / "repo", "bad", FAILURES[0][0], tmp_path / "bad.log")
    stage(tmp_path / "repo", "good", TENSORS + SAMPLES, tmp_path / "good.log")
    with serve("--model-repository", str(tmp_path / "repo"), "--model-control-mode", "explicit") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        with pytest.raises(InferenceServerException) as info:
            client.load_model("bad")
        assert FAILURES[0][1] in info.value.message()
        assert not client.is_model_ready("bad")
        client.load_model("good")
        assert client.is_model_ready("good") and len(events(tmp_path / "good.log")) == 5
