"""The `pytriton serve` command line: argument parsing and errors (click's CliRunner); GPUs: tests/e2e/test_gpus.py."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from click.testing import CliRunner

from pytriton.cli.model import parse_tensor
from pytriton.cli.serve import main
from tests._support.ports import LOCAL_PORTS
from tests._support.serving import serve


@pytest.mark.parametrize(
    "text, expected",
    [
        ("INPUT0:int32:16", ("INPUT0", "INT32", (16,))),
        ("X:FP32:2,3", ("X", "FP32", (2, 3))),
        ("TEXT:bytes:-1", ("TEXT", "BYTES", (-1,))),
        ("B:bf16:4", ("B", "BF16", (4,))),
        ("S:BOOL:", ("S", "BOOL", ())),
    ],
)
def test_parse_tensor(text, expected):
    spec = parse_tensor(text, "input")
    assert (spec.name, spec.datatype, spec.shape) == expected


@pytest.mark.parametrize(
    "args, message",
    [
        (["--input", "INPUT0:int32"], "expected NAME:DTYPE:SHAPE"),
        (["--input", "INPUT0:complex:4"], "unknown datatype 'complex'"),
        (["--input", "INPUT0:int32:a,b"], "comma-separated integers"),
        (["--input", "INPUT0:int32:-5"], "dimensions must be >= -1"),
        (["--max-batch-size", "-1"], "-1 is not in the range"),
        ([], "declares no outputs, and no --output was given"),
    ],
)
def test_bad_arguments_are_usage_errors(args, message):
    result = CliRunner().invoke(main, ["serve", "tests.models:identity", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_unknown_callable_is_reported():
    # the server starts, its worker cannot find the attribute, and the server exits with the worker's error
    result = CliRunner().invoke(main, ["serve", "tests.models:nope", "--output", "O:int32:1", *LOCAL_PORTS])
    assert result.exit_code == 1
    assert "cannot load inference callable 'tests.models:nope'" in result.output
    assert "has no attribute 'nope'" in result.output


def test_a_module_that_fails_to_import_stops_the_server_with_the_workers_error():
    result = CliRunner().invoke(main, ["serve", "tests.cli_targets.broken:fn", "--output", "O:int32:1",
                                       *LOCAL_PORTS])
    assert result.exit_code == 1
    assert "cannot load inference callable 'tests.cli_targets.broken:fn'" in result.output
    assert "RuntimeError: this module is broken on purpose" in result.output


@pytest.mark.parametrize("target", ["no_colon", "mod:", ":fn", "mod:1abc", "a..b:fn", "mod:fn:x", "my-mod:fn"])
def test_malformed_targets_are_usage_errors(target):
    result = CliRunner().invoke(main, ["serve", target, "--output", "O:int32:1"])
    assert result.exit_code == 2
    assert "expected MODULE:CALLABLE" in result.output and repr(target) in result.output


@pytest.mark.parametrize(
    "target, message",
    [
        ("tests.no_such_module:fn", "No module named 'tests.no_such_module'"),
        ("no_such_top_level_module:fn", "No module named 'no_such_top_level_module'"),
        ("tests.models.sub:fn", "'tests.models' is not a package"),
    ],
)
def test_a_module_that_cannot_be_found_is_reported_before_anything_starts(target, message):
    result = CliRunner().invoke(main, ["serve", target, "--output", "O:int32:1"])
    assert result.exit_code == 1
    assert f"cannot load '{target}'" in result.output and message in result.output


def test_the_server_process_does_not_import_the_callable(tmp_path):
    """Only child processes import the user's module (and its package), once each: the one that reads its
    declaration at start, then the workers; the model is named after the attribute (a callable object's class name
    is not used)."""
    log = tmp_path / "imports.log"
    args = ["--instances", "2", "--input", "IN:int32:-1", "--output", "OUT:int32:-1"]
    with serve("tests.cli_targets.recorded:double_model", *args, env={"PYTRITON_TEST_IMPORT_LOG": str(log)}) \
            as server:
        workers = set(server.worker_pids())
        client = grpcclient.InferenceServerClient(server.grpc_url)
        tensor = grpcclient.InferInput("IN", [3], "INT32")
        tensor.set_data_from_numpy(np.array([1, 2, 3], dtype=np.int32))
        assert client.infer("double_model", [tensor]).as_numpy("OUT").tolist() == [2, 4, 6]
        client.close()
    imports = [line.split() for line in log.read_text().splitlines()]
    importers = {int(pid) for _, pid in imports}
    assert server.process.pid not in importers
    (describer,) = importers - workers
    assert sorted(imports) == sorted([[name, str(pid)] for pid in (*workers, describer)
                                      for name in ("tests.cli_targets", "tests.cli_targets.recorded")])


def test_the_server_modules_are_imported_once_per_process():
    """`pytriton serve` restarts itself with glibc's malloc tunables before it imports the server (not after: that
    import, most of a start's CPU time, would be thrown away); each process imports the server's modules at most
    once. (Python's import-time profile, inherited through the environment, names every module each process
    imports.)"""
    with serve("examples.add_sub:add_sub", env={"PYTHONPROFILEIMPORTTIME": "1"}) as server:
        pass
    profiles = [line for line in server.lines if line.startswith("import time:")]
    assert profiles, server.log
    loads = sum(1 for line in profiles if line.split("|")[-1].strip() == "pytriton.server.process")
    assert loads == 1, server.log


def test_a_bad_environment_variable_is_reported_by_name():
    result = CliRunner().invoke(main, ["serve", "tests.models:identity", "--input", "IN_O:int32:1",
                                       "--output", "OUT_O:int32:1", *LOCAL_PORTS],
                                env={"PYTRITON_INLINE_MAX_BYTES": "lots"})
    assert result.exit_code == 1
    assert "PYTRITON_INLINE_MAX_BYTES='lots': expected a non-negative integer" in result.output


def test_duplicate_tensor_names_are_rejected():
    result = CliRunner().invoke(
        main, ["serve", "tests.models:identity", "--input", "A:int32:1", "--input", "A:int32:1", "--output", "O:int8:1"]
    )
    assert result.exit_code == 2
    assert "duplicate input names ['A']" in result.output
