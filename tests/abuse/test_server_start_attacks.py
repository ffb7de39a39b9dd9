"""A server started where the temporary directory's path is long (a CI runner's or pytest's tmp folder): its worker
socket lives in its run directory, and a Unix socket's path holds 107 bytes at most. It starts anyway."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

from tests._support.serving import serve, tensor_args


def test_a_long_temporary_directory_path_does_not_stop_the_server(tmp_path: Path):
    deep = tmp_path / ("d" * 60) / ("e" * 40)
    deep.mkdir(parents=True)
    assert len(str(deep)) > 107
    args = tensor_args("input", [("IN_X", "int32", "1")]) + tensor_args("output", [("OUT_X", "int32", "1")])
    with serve("tests.models:identity", *args, env={"TMPDIR": str(deep)}) as server:  # (it failed with a ZMQError)
        client = grpcclient.InferenceServerClient(server.grpc_url)
        x = grpcclient.InferInput("IN_X", [1], "INT32")
        x.set_data_from_numpy(np.array([7], dtype=np.int32))
        assert client.infer("identity", [x]).as_numpy("OUT_X").tolist() == [7]
        client.close()
    fallback = tempfile.gettempdir() if len(tempfile.gettempdir()) < 60 else "/tmp"
    leftovers = [e for e in os.listdir(fallback) if e.startswith("pytriton-") and f"-{server.process.pid}-" in e]
    assert leftovers == []
