"""`pytriton serve` of models declared with @triton_model: the mission's command as typed, flags over declarations,
classes and file paths as targets, and the messages a user gets when something is missing."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from click.testing import CliRunner

from pytriton.cli.serve import main
from tests._support.paths import REPO
from tests._support.ports import LOCAL_PORTS
from tests._support.serving import serve

DECLARED = "tests.cli_targets.declared"


def _vector_inputs(module, a: np.ndarray, b: np.ndarray) -> list:
    inputs = []
    for name, array in (("INPUT0", a), ("INPUT1", b)):
        tensor = module.InferInput(name, list(array.shape), "INT32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def test_the_mission_command_serves_a_module_that_declares_its_model():
    """`pytriton serve mymod:infer_fn --instances 2`: tensors and batching come from the module, 2 instances."""
    with serve(f"{DECLARED}:infer_fn", "--instances", "2") as server:
        assert len(server.worker_pids()) == 2
        a = np.arange(8, dtype=np.int32).reshape(2, 4)
        b = np.ones((2, 4), dtype=np.int32)
        client = grpcclient.InferenceServerClient(server.grpc_url)
        config = client.get_model_config("infer_fn", as_json=True)["config"]
        assert config["max_batch_size"] == 8 and "dynamic_batching" in config
        assert [(g["kind"], g["count"]) for g in config["instance_group"]] == [("KIND_CPU", 2)]
        assert [(t["name"], t["data_type"], t["dims"]) for t in config["input"]] == [
            ("INPUT0", "TYPE_INT32", ["4"]), ("INPUT1", "TYPE_INT32", ["4"])]
        for _ in range(4):
            result = client.infer("infer_fn", _vector_inputs(grpcclient, a, b))
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
        client.close()
        http = httpclient.InferenceServerClient(server.http_url)
        result = http.infer("infer_fn", _vector_inputs(httpclient, a, b))
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        http.close()


def test_flags_override_the_declaration():
    args = ["--model-name", "renamed", "--max-batch-size", "2", "--no-dynamic-batching", "--instances", "1",
            "--input", "IN:int32:3"]
    with serve(f"{DECLARED}:double", *args) as server:
        assert len(server.worker_pids()) == 1
        client = grpcclient.InferenceServerClient(server.grpc_url)
        config = client.get_model_config("renamed", as_json=True)["config"]
        assert config["max_batch_size"] == 2 and "dynamic_batching" not in config
        assert [g["count"] for g in config["instance_group"]] == [1]
        assert [(t["name"], t["dims"]) for t in config["input"]] == [("IN", ["3"])]  # replaced
        assert [(t["name"], t["dims"]) for t in config["output"]] == [("OUT", ["-1"])]  # as declared
        tensor = grpcclient.InferInput("IN", [1, 3], "INT32")
        tensor.set_data_from_numpy(np.array([[1, 2, 3]], dtype=np.int32))
        assert client.infer("renamed", [tensor]).as_numpy("OUT").tolist() == [[2, 4, 6]]
        client.close()


@pytest.mark.parametrize("target, model, device", [("OnDevice", "OnDevice", b"cpu"), ("Plain.infer", "infer", b"none")])
def test_a_class_is_instantiated_once_in_each_worker(target, model, device):
    with serve(f"{DECLARED}:{target}", "--instances", "2") as server:
        workers = set(server.worker_pids())
        client = grpcclient.InferenceServerClient(server.grpc_url)
        tensor = grpcclient.InferInput("IN", [1], "INT8")
        tensor.set_data_from_numpy(np.zeros(1, dtype=np.int8))
        seen = set()
        for _ in range(10):
            result = client.infer(model, [tensor])
            assert result.as_numpy("DEVICE").tolist() == [device]
            seen.add(int(result.as_numpy("PID")[0]))
        assert seen and seen <= workers  # made in a worker, not in the server
        client.close()


@pytest.mark.parametrize("target, cwd", [("./model_file.py:fn", REPO / "tests/cli_targets/files"),
                                         ("tests/cli_targets/files/model_file.py:fn", REPO)])
def test_a_file_path_is_served_with_its_sibling_modules_importable(target, cwd):
    with serve(target, cwd=cwd) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        tensor = httpclient.InferInput("IN", [2], "INT32")
        tensor.set_data_from_numpy(np.array([1, 5], dtype=np.int32))
        assert client.infer("fn", [tensor]).as_numpy("OUT").tolist() == [3, 15]
        client.close()


def test_a_model_declared_without_inputs_answers():
    with serve(f"{DECLARED}:no_inputs") as server:
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        assert grpc.get_model_metadata("no_inputs", as_json=True).get("inputs", []) == []
        assert grpc.infer("no_inputs", []).as_numpy("ANSWER").tolist() == [42]
        grpc.close()
        http = httpclient.InferenceServerClient(server.http_url)
        assert http.infer("no_inputs", []).as_numpy("ANSWER").tolist() == [42]
        http.close()


def _invoke(*args: str):
    return CliRunner().invoke(main, ["serve", *args, *LOCAL_PORTS])


def test_a_module_without_declaration_or_flags_is_shown_how_to_declare():
    result = _invoke(f"{DECLARED}:undeclared")
    assert result.exit_code == 2
    text = result.output
    assert f"model 'undeclared' ({DECLARED}:undeclared) declares no outputs, and no --output was given" in text
    assert "from pytriton.model_config import ModelConfig, Tensor, triton_model" in text
    assert "@triton_model(" in text and 'outputs=[Tensor(name="OUTPUT0", dtype=np.float32, shape=(-1,))]' in text
    assert "def undeclared(requests):" in text
    assert f"pytriton serve {DECLARED}:undeclared --input INPUT0:fp32:-1 --output OUTPUT0:fp32:-1" in text


def test_a_class_without_declaration_is_shown_as_a_class():
    result = _invoke("tests.cli_targets.recorded:Doubler")
    assert result.exit_code == 2
    assert "class Doubler:" in result.output and "def __call__(self, requests):" in result.output


@pytest.mark.parametrize(
    "target, args, message",
    [
        ("tests.models:identity", ["--output", "OUT_X:int32:1"],
         "model 'identity' (tests.models:identity) declares no inputs, and no --input was given"),
        (f"{DECLARED}:outputs_only", [],
         f"model 'outputs_only' ({DECLARED}:outputs_only): its @triton_model declares no inputs. Add inputs="),
    ],
)
def test_forgotten_inputs_are_refused_at_start_naming_the_model(target, args, message):
    result = _invoke(target, *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "--input NAME:DTYPE:SHAPE" in result.output or "--input INPUT0:fp32:-1" in result.output
    assert "inputs=[]" in result.output  # how to say "no inputs" on purpose


def test_a_model_without_inputs_cannot_batch():
    result = _invoke(f"{DECLARED}:no_inputs", "--max-batch-size", "4")
    assert result.exit_code == 2
    assert "model 'no_inputs' has no inputs, so it cannot batch" in result.output


@pytest.mark.parametrize("target", ["./no_such_model.py:fn", "tests/cli_targets/no_such_model.py:fn"])
def test_a_file_that_does_not_exist_is_named(target):
    result = _invoke(target)
    assert result.exit_code == 1
    assert f"cannot load '{target}': no such file '{target.split(':')[0]}'" in result.output


def test_a_class_without_call_is_refused_with_how_to_name_a_method():
    result = _invoke(f"{DECLARED}:NoCall")
    assert result.exit_code == 1
    assert "class 'NoCall' has no __call__ method" in result.output
    assert f"'{DECLARED}:NoCall.infer'" in result.output


def test_an_exception_in_init_stops_the_start_with_the_workers_error():
    result = _invoke(f"{DECLARED}:FailsToStart")
    assert result.exit_code == 1
    assert f"cannot load inference callable '{DECLARED}:FailsToStart'" in result.output
    assert "RuntimeError: the weights are missing on purpose" in result.output


def test_the_demo_command_serves_the_declared_example():
    """scripts/demo's `pytriton serve` line, as written there: the example declares its tensors and batching."""
    (line,) = [line for line in (REPO / "scripts/demo").read_text().splitlines() if "pytriton serve" in line]
    target, *flags = line.split("pytriton serve", 1)[1].replace('"$@"', "").split()
    assert (target, flags) == ("examples.add_sub:add_sub", [])
    with serve(target) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        config = client.get_model_config("add_sub", as_json=True)["config"]
        assert config["max_batch_size"] == 8 and "dynamic_batching" in config
        a = np.arange(32, dtype=np.int32).reshape(2, 16)
        result = client.infer("add_sub", _vector_inputs(grpcclient, a, a))
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - a)
        client.close()


def test_a_module_that_ends_the_importing_process_is_reported():
    result = _invoke("tests.cli_targets.exits:fn")
    assert result.exit_code == 1
    assert ("cannot load inference callable 'tests.cli_targets.exits:fn': the process that imports it exited with "
            "code 3 before it answered") in result.output
