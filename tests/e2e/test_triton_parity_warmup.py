"""`model_warmup` samples tritonserver 2.51 refuses or runs in its own way, loaded one by one in mode explicit: an
input of another shape or datatype than the model's, a variable dimension, an input with no data source, a data file
missing, too short, longer than needed or outside the model's `warmup/` folder, a batch_size of 0, a count of 0, an
input the model does not declare, a sample without a name (test_model_warmup.py compares the executions of the usual
samples). Each model runs tests/repositories/warmup_record (Triton's own API), which writes down its executions.

What is compared: the load's status, the reason's own words (without pytriton's "<config.pbtxt>: field ... of model
...:" and Triton's "Invalid argument:" heads) and how many executions the warm-up ran. The answers pytriton gives are
pinned; (slow, where it is installed) the real tritonserver 2.51 gives the same except where TRITON_DIFFERS says why
pytriton answers otherwise on purpose (docs/guide/model-repositories.md)."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._support.paths import REPOSITORIES
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, real_tritonserver
from tests._support.serving import serve

RECORDER = REPOSITORIES / "warmup_record" / "model.py"
TENSORS = """max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""
INPUT1 = 'inputs { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } }'


def _input0(source: str, dims: str = "3", datatype: str = "TYPE_FP32") -> str:
    return f'inputs {{ key: "INPUT0" value: {{ data_type: {datatype} dims: [ {dims} ] {source} }} }}'


def _sample(*inputs: str, head: str = 'name: "s" batch_size: 1') -> str:
    return f"model_warmup [ {{ {head} {' '.join(inputs)} }} ]"


ZEROS = "zero_data: true"
CASES = {
    "w_dims": _sample(_input0(ZEROS, dims="4"), INPUT1),
    "w_datatype": _sample(_input0(ZEROS, datatype="TYPE_INT32"), INPUT1),
    "w_variable_dims": _sample(_input0(ZEROS), INPUT1.replace("[ 2 ]", "[ -1 ]")),
    "w_no_source": _sample(_input0(""), INPUT1),
    "w_file_missing": _sample(_input0('input_data_file: "nope.bin"'), INPUT1),
    "w_file_short": _sample(_input0('input_data_file: "short.bin"'), INPUT1),
    "w_file_long": _sample(_input0('input_data_file: "long.bin"'), INPUT1),
    "w_file_outside": _sample(_input0('input_data_file: "../config.pbtxt"'), INPUT1),
    "w_batch_size_0": _sample(_input0(ZEROS), INPUT1, head='name: "s" batch_size: 0'),
    "w_count_0": _sample(_input0(ZEROS), INPUT1, head='name: "s" batch_size: 2 count: 0'),
    "w_undeclared_input": _sample(_input0(ZEROS), INPUT1, 'inputs { key: "INPUT9" value: { data_type: TYPE_FP32 '
                                                          'dims: [ 1 ] zero_data: true } }'),
    "w_no_name": _sample(_input0(ZEROS), INPUT1, head="batch_size: 1"),
}


def _stage(root: Path) -> Path:
    for name, warmup in CASES.items():
        model = root / name
        (model / "1").mkdir(parents=True)
        (model / "warmup").mkdir()
        shutil.copy(RECORDER, model / "1" / "model.py")
        np.arange(2, dtype=np.float32).tofile(model / "warmup" / "short.bin")
        np.arange(5, dtype=np.float32).tofile(model / "warmup" / "long.bin")
        (model / "config.pbtxt").write_text(f'backend: "python"\n{TENSORS}{warmup}\nparameters {{ key: "log" value: '
                                            f'{{ string_value: "{root / name}.log" }} }}\n')
    return root


def _reason(error: str) -> str:
    """A load's reason in its own words: without pytriton's "<path>: field F of model M: " head, Triton's "Invalid
    argument: " or "Internal: " head, and the closing ";"."""
    reason = error.split(" is at UNAVAILABLE state: ", 1)[-1].rstrip("\n").removesuffix(";")
    reason = re.sub(r"^\S+config\.pbtxt: field '.*?' of model '[^']*': ", "", reason)
    return re.sub(r"^(Invalid argument|Internal): ", "", reason)


def _loads(http_url: str, root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in CASES:
        request = urllib.request.Request(f"http://{http_url}/v2/repository/models/{name}/load", b"", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status, reason = answer.status, ""
        except urllib.error.HTTPError as error:
            status, reason = error.code, _reason(json.loads(error.read())["error"])
        log = root / f"{name}.log"
        events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        executions = [event for event in events if "requests" in event]
        first = executions[0]["requests"][0]["inputs"] if executions else {}
        out[name] = (status, reason.replace(str(root), "<repository>"), len(executions),
                     first.get("INPUT0", {}).get("data") if name.startswith("w_file") else sorted(first))
    return json.loads(json.dumps(out))


REQUEST_ID = "[request id: <id_unknown>] "
ALL = ["INPUT0", "INPUT1"]
OURS: dict[str, Any] = json.loads(json.dumps({
    # a declared input is checked as a request's, in Triton's words
    "w_dims": (400, REQUEST_ID + "unexpected shape for input 'INPUT0' for model 'w_dims'. Expected [-1,3], got "
               "[1,4]. NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be "
               "prepended to each input shape. If you want to specify the full shape including the batch dim in "
               "your input dims config, try setting max_batch_size to zero. See the model configuration docs for "
               "more info on max_batch_size.", 0, []),
    "w_datatype": (400, REQUEST_ID + "inference input 'INPUT0' data-type is 'INT32', but model 'w_datatype' expects "
                   "'FP32'", 0, []),
    "w_variable_dims": (400, "warmup setting expects all variable-size dimensions are specified for input 'INPUT1'",
                        0, []),
    "w_no_source": (400, REQUEST_ID + "warmup setting expects input 'INPUT0' to have input_data_type set", 0, []),
    "w_file_missing": (400, "failed to open text file for read <repository>/w_file_missing/warmup/nope.bin: No such "
                       "file or directory", 0, None),
    "w_file_short": (400, REQUEST_ID + "warmup setting expects 12 bytes, but the data provided from short.binonly has "
                     "8 bytes", 0, None),
    "w_file_long": (200, "", 1, [[0.0, 1.0, 2.0]]),  # (its first bytes)
    # a data file is read from the model's warmup/ folder only
    "w_file_outside": (400, "warmup data file path '../config.pbtxt' in model 'w_file_outside' is outside model "
                       "directory", 0, None),
    "w_batch_size_0": (200, "", 0, []),  # (as Triton: nothing runs)
    "w_count_0": (200, "", 1, ALL),  # (as Triton: once)
    "w_undeclared_input": (200, "", 1, ["INPUT0", "INPUT1", "INPUT9"]),  # (as Triton: handed to the model)
    "w_no_name": (200, "", 1, ALL),
}))

# Where tritonserver 2.51 answers otherwise, and pytriton keeps its answer on purpose
TRITON_DIFFERS: dict[str, Any] = {
    # Triton reads a file anywhere the path leads (here the model's config.pbtxt, as FP32 data)
    "w_file_outside": "runs",
}


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    root = _stage(tmp_path_factory.mktemp("warmups"))
    with serve("--model-repository", str(root), "--model-control-mode", "explicit") as server:
        return _loads(server.http_url, root)


@pytest.mark.parametrize("case", OURS)
def test_a_warmup_sample_loads_as_the_table_says(answers, case):
    assert answers[case] == OURS[case]


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_loads_them_as_the_table_says():
    with tempfile.TemporaryDirectory() as folder:
        root = _stage(Path(folder) / "repo")
        urls: dict[str, str] = {}
        with real_tritonserver(root, Path(folder) / "scratch", urls=urls, args=("--model-control-mode", "explicit")):
            theirs = _loads(urls["http"], root)
    outside = theirs.pop("w_file_outside")
    assert outside[:3] == [200, "", 1]  # (what TRITON_DIFFERS says)
    assert theirs == {case: answer for case, answer in OURS.items() if case not in TRITON_DIFFERS}
