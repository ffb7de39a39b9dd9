"""Attacks on Triton model repositories: a configuration too large for a command line, a model whose initialize
blocks, forks or exits, unload while requests run and wait; the server stays up and answers its other models."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests._support.serving import serve

ECHO_MODEL = """
import json
import shutil
import tempfile
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.parameters = len(json.loads(args["model_config"])["parameters"])

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
                                                            * 0 + self.parameters)]) for r in requests]
"""

CONFIG = """
backend: "python"
max_batch_size: 0
input [{ name: "X" data_type: TYPE_FP32 dims: [-1] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [-1] }]
"""


def _x(value: float) -> list[grpcclient.InferInput]:
    x = grpcclient.InferInput("X", [1], "FP32")
    x.set_data_from_numpy(np.array([value], dtype=np.float32))
    return [x]


def test_a_configuration_larger_than_a_command_line_argument_loads(tmp_path: Path):
    """A config.pbtxt of 600 KB (labels, tokenizer settings in `parameters`: Triton loads it) once failed with
    "Argument list too long": the worker's whole specification rode on its command line (128 KiB per argument)."""
    model = tmp_path / "big"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(ECHO_MODEL)
    parameters = "".join(f'parameters {{ key: "p{i}" value {{ string_value: "{"v" * 1000}" }} }}\n' for i in range(600))
    (model / "config.pbtxt").write_text(CONFIG + parameters)
    with serve("--model-repository", str(tmp_path)) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        assert client.is_model_ready("big")
        assert client.infer("big", _x(1.0)).as_numpy("Y").tolist() == [600.0]
        config = client.get_model_config("big", as_json=True)["config"]
        assert len(config["parameters"]) == 600 and json.dumps(config).count("v" * 1000) == 600
        client.close()


UPLOAD_CONFIG = json.dumps({"backend": "python", "max_batch_size": 0,
                            "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1]}],
                            "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}]})
UPLOAD_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
                                                            * {factor})]) for r in requests]
"""


def _uploads(tmp: Path) -> list[str]:
    """The upload folders under `tmp` (the servers' run directories hold them)."""
    return sorted(p.name for p in tmp.glob("*/pytriton-model-*"))


def test_reloading_uploaded_files_keeps_one_folder_and_unload_removes_it(tmp_path: Path):
    """A client loading a model from files again and again (a load storm, each with 1 MB of files): each load wrote a
    new folder that stayed until the server stopped, so the disk filled. As Triton, the folder of a model's files
    lives as long as the model loaded from it: a reload replaces it, a failed load leaves none, unload removes it."""
    tmp = Path(tempfile.mkdtemp(prefix="a4-", dir="/tmp"))  # (short: the server's worker socket lives under it)
    repo = tmp_path / "repo"
    repo.mkdir()
    weights = b"w" * (1 << 20)
    try:
        with serve("--model-repository", str(repo), "--model-control-mode", "explicit", "--allow-model-upload",
                   env={"TMPDIR": str(tmp)}) as server:
            client = grpcclient.InferenceServerClient(server.grpc_url)
            for factor in range(1, 6):
                client.load_model("up", config=UPLOAD_CONFIG,
                                  files={"file:1/model.py": UPLOAD_MODEL.format(factor=factor).encode(),
                                         "file:1/weights.bin": weights})
                assert client.infer("up", _x(1.0)).as_numpy("Y").tolist() == [float(factor)]
            assert len(_uploads(tmp)) == 1
            with pytest.raises(grpcclient.InferenceServerException, match="load failed"):
                client.load_model("up", config=json.dumps({"backend": "python", "input": [{"name": "X"}]}),
                                  files={"file:1/model.py": b"x = 1"})
            assert len(_uploads(tmp)) == 1  # the failed one's removed; the one served stays
            assert client.infer("up", _x(1.0)).as_numpy("Y").tolist() == [5.0]
            client.unload_model("up")
            deadline = time.monotonic() + 20
            while _uploads(tmp) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _uploads(tmp) == []
            client.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


BLOCKING_INIT = """
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        open({started!r}, "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists({release!r}) and time.monotonic() < deadline:
            time.sleep(0.01)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
                for r in requests]
"""


def test_a_model_whose_initialize_blocks_holds_up_no_other_models_load(tmp_path: Path):
    """As Triton 2.51 (measured: a python model sleeping in initialize stays LOADING while another model loads in 2 s):
    loading, reloading and unloading other models goes on while one model's initialize blocks; only a load of that
    same model waits for it. (All loads waited here: one at a time, up to the 120 s start timeout.)"""
    import threading

    repo = tmp_path / "repo"
    started, release = tmp_path / "started", tmp_path / "release"
    for name, source in (("blocks", BLOCKING_INIT.format(started=str(started), release=str(release))),
                         ("echo", UPLOAD_MODEL.format(factor=1))):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(source)
        (repo / name / "config.pbtxt").write_text(CONFIG)
    try:
        with serve("--model-repository", str(repo), "--model-control-mode", "explicit") as server:
            client = grpcclient.InferenceServerClient(server.grpc_url)
            outcome: list = []

            def load_blocks() -> None:
                other = grpcclient.InferenceServerClient(server.grpc_url)
                try:
                    other.load_model("blocks")
                    outcome.append(None)
                except Exception as exc:  # noqa: BLE001 - the test reports it
                    outcome.append(exc)
                other.close()

            loader = threading.Thread(target=load_blocks)
            loader.start()
            deadline = time.monotonic() + 30
            while not started.exists():
                assert time.monotonic() < deadline, "the blocking initialize never started"
                time.sleep(0.01)
            client.load_model("echo")  # (waited for the other load before)
            assert client.infer("echo", _x(2.0)).as_numpy("Y").tolist() == [2.0]
            client.load_model("echo")  # a reload
            client.unload_model("echo")
            assert not client.is_model_ready("echo")
            states = {m["name"]: m.get("state") for m in client.get_model_repository_index(as_json=True)["models"]}
            assert states == {"blocks": "LOADING", "echo": "UNAVAILABLE"}
            assert loader.is_alive() and not outcome
            release.touch()
            loader.join(60)
            assert outcome == [None]
            assert client.infer("blocks", _x(3.0)).as_numpy("Y").tolist() == [3.0]
            client.close()
    finally:
        release.touch()
