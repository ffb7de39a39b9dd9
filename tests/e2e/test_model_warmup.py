"""config.pbtxt `model_warmup`, as Triton 2.51 runs it: each instance runs every sample (`count` executions of
`batch_size` requests sharing one set of data) after initialize() and before the model is ready; a failed sample fails
the load with Triton's words and the server serves on.

The model (tests/repositories/warmup_record/model.py) writes each execution down; the expected executions below are
what the same model and config wrote on the real tritonserver 2.51 (random data compared by shape and sharing only).
The slow tests at the end stage the same repositories for the real tritonserver 2.51 and for `pytriton serve` and
compare them live (rerun: `.venv/bin/python -m pytest -q -p no:cacheprovider -m slow tests/e2e/test_model_warmup.py`,
with REAL_TRITONSERVER_ENV pointing at nvidia-pytriton 0.7.0's site-packages where it is not /tmp/nvpt's).
"""

from __future__ import annotations

import json
import re
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
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, real_tritonserver
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
     "failed to run warmup sample 'w1': Failed to process the request(s) for model 'bad_0', message: "
     "TritonModelException: warm-up refused; "),
    (TENSORS + 'model_warmup [ { name: "w" batch_size: 5 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 '
               'dims: [ 3 ] zero_data: true } } inputs { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 2 ] '
               'zero_data: true } } } ]',
     "failed to run warmup sample 'w': " + "batch size 5 for 'bad_0', max allowed is 4; " * 5),
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


# The executions each instance runs for SAMPLES, in order: the sample each one belongs to
EXECUTED_SAMPLES = ["zeros", "zeros", "file", "rand"]


def per_instance(seen: list[dict]) -> dict[str, list[dict]]:
    """The events of each instance, in the order it wrote them."""
    instances: dict[str, list[dict]] = {}
    for event in seen:
        instances.setdefault(event.get("init") or event["instance"], []).append(event)
    return instances


def comparable(seen: list[dict]) -> dict[str, list[object]]:
    """Each instance's events with random data reduced to shapes, dtypes and which requests share data."""
    result: dict[str, list[object]] = {}
    for instance, mine in per_instance(seen).items():
        result[instance] = [mine[0]]
        for sample, execution in zip(EXECUTED_SAMPLES, mine[1:], strict=False):
            requests = execution["requests"]
            if sample == "rand":
                requests = [{**r, "inputs": {name: {"shape": t["shape"], "dtype": t["dtype"]}
                                             for name, t in r["inputs"].items()},
                             "same_data_as": requests.index(r)} for r in requests]
            result[instance].append({"instance": execution["instance"], "requests": requests})
        result[instance] += mine[1 + len(EXECUTED_SAMPLES):]
    return result


def warmup_statistics(client: grpcclient.InferenceServerClient, model: str) -> tuple[object, ...]:
    stats = client.get_inference_statistics(model, as_json=True)["model_stats"][0]
    return (int(stats["inference_count"]), int(stats["execution_count"]),
            int(stats["inference_stats"]["success"]["count"]),
            {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]})


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_runs_the_same_warmup(tmp_path):
    """The warm-up above, run live on the real tritonserver 2.51 and on ours with the same repository: the same
    executions per instance in the same order (batch sizes, shapes, dtypes, zero and file data; random data by shape
    and by which requests share it) and the same statistics."""
    config = TENSORS + 'instance_group [ { kind: KIND_CPU count: 2 } ]' + SAMPLES
    logs = {side: tmp_path / f"{side}.log" for side in ("real", "ours")}
    stage(tmp_path / "real" / "repo", "rec", config, logs["real"])
    stage(tmp_path / "ours" / "repo", "rec", config, logs["ours"])
    with real_tritonserver(tmp_path / "real" / "repo", tmp_path / "real") as url:
        real_seen = events(logs["real"])  # (all written before it said it is ready)
        real_statistics = warmup_statistics(grpcclient.InferenceServerClient(url), "rec")
    with serve("--model-repository", str(tmp_path / "ours" / "repo")) as server:
        our_seen = events(logs["ours"])
        our_statistics = warmup_statistics(grpcclient.InferenceServerClient(server.grpc_url), "rec")
    assert set(per_instance(real_seen)) == {"rec_0_0", "rec_0_1"} and len(real_seen) == 10
    assert comparable(our_seen) == comparable(real_seen)
    assert our_statistics == real_statistics


def logged(lines: list[str], prefix: str) -> str | None:
    """The text after `prefix` in the real tritonserver's log, without the Python traceback ("At: ...") it adds after
    a model's exception (pytriton's errors never carry one); None where no line has it."""
    found = [line for line in lines if f'] "{prefix}' in line]
    if not found:
        return None
    text = json.loads(found[0][found[0].index('] "') + 2:])[len(prefix):]
    return re.sub(r"\n\nAt:\n(  .*\n)+", "", text)


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
@pytest.mark.parametrize(("config", "message"), FAILURES, ids=["model-raises", "batch-too-large"])
def test_the_real_tritonserver_refuses_a_failed_warmup_in_the_same_words(tmp_path, config, message):
    """A model whose warm-up fails: the real tritonserver 2.51 logs why it did not load it and exits; ours says the
    same words. tritonserver 2.51 at times dies of SIGSEGV after the model's exception, before it logs the refusal (and
    an explicit load of the model can do the same): then its log shows the request's error only, compared alone; at
    times it dies before it logs even that (about 1 start in 10 here), and is started again."""
    for side in ("real", "ours"):
        stage(tmp_path / side / "repo", "bad", config, tmp_path / f"{side}.log")
    refusal = error = None
    for attempt in range(5):  # (it can also die before it logs either line: then it is started again)
        lines: list[str] = []
        with pytest.raises(RuntimeError, match="did not start"), \
                real_tritonserver(tmp_path / "real" / "repo", tmp_path / "real" / str(attempt), log=lines):
            pass
        refusal = logged(lines, "failed to load 'bad' version 1: Invalid argument: ")
        error = logged(lines, "Failed to process the request(s) for model ")
        if refusal is not None or error is not None:
            break
    if refusal is not None:
        assert refusal == message
    else:
        assert error is not None, "".join(lines[-25:])
        assert f"Failed to process the request(s) for model {error}; " in message
    command = [sys.executable, "-m", "pytriton.cli", "serve", "--model-repository", str(tmp_path / "ours" / "repo")]
    for service in ("grpc", "http", "metrics"):
        command += [f"--{service}-port", "0", f"--{service}-address", "127.0.0.1"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert message in result.stderr
