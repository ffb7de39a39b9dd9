"""The `pytriton serve` command line: argument parsing and errors (click's CliRunner), GPU pinning."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from click.testing import CliRunner
from grpc_health.v1 import health_pb2, health_pb2_grpc
import grpc

from pytriton.cli import main, parse_tensor
from tests.conftest import serve


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
        ([], "at least one --output"),
    ],
)
def test_bad_arguments_are_usage_errors(args, message):
    result = CliRunner().invoke(main, ["serve", "tests.models:identity", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_unknown_callable_is_reported():
    result = CliRunner().invoke(main, ["serve", "tests.models:nope", "--output", "O:int32:1"])
    assert result.exit_code == 1
    assert "has no attribute 'nope'" in result.output


def test_duplicate_tensor_names_are_rejected():
    result = CliRunner().invoke(
        main, ["serve", "tests.models:identity", "--input", "A:int32:1", "--input", "A:int32:1", "--output", "O:int8:1"]
    )
    assert result.exit_code == 2
    assert "duplicate input names ['A']" in result.output


def test_gpus_pin_each_instance_and_health_check():
    args = ["--instances", "2", "--gpus", "0,1", "--output", "DEVICES:bytes:1", "--input", "IN_X:int8:1"]
    with serve("tests.models:visible_devices", *args) as server:
        assert len(server.worker_pids()) == 4
        client = grpcclient.InferenceServerClient(server.grpc_url)
        config = client.get_model_config("visible_devices", as_json=True)["config"]
        groups = [(g["kind"], g["count"], g["gpus"]) for g in config["instance_group"]]
        assert groups == [("KIND_GPU", 2, [0]), ("KIND_GPU", 2, [1])]
        seen = set()
        tensor = grpcclient.InferInput("IN_X", [1], "INT8")
        tensor.set_data_from_numpy(np.zeros(1, dtype=np.int8))
        for _ in range(20):
            seen.add(client.infer("visible_devices", [tensor]).as_numpy("DEVICES")[0])
            if seen == {b"0", b"1"}:
                break
        assert seen <= {b"0", b"1"} and seen
        with grpc.insecure_channel(server.grpc_url) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for service in ("", "inference.GRPCInferenceService"):
                reply = stub.Check(health_pb2.HealthCheckRequest(service=service))
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
