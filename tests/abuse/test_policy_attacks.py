"""Attacks on the response cache and the queue policies: a cached model reloaded with other code must not answer
from its predecessor's entries, nor store what a client computed from a shared-memory region under the key of bytes
the region held before the client overwrote it (cross-client poisoning); a request's `priority` and `timeout` over
HTTP JSON must be unsigned integers, as Triton 2.51 parses them (measured: a negative, fractional, string, boolean or
>= 2**64 value is answered 500 with "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as
unsigned-integer"; 0, 2**63 and huge timeouts pass; a priority past the model's levels means its default level)."""

from __future__ import annotations

import http.client
import json
import queue
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm

from tests._support.serving import serve, tensor_args

IDENTITY = tensor_args("input", [("IN_X", "int32", "1")]) + tensor_args("output", [("OUT_X", "int32", "1")])

CACHED_CONFIG = """
backend: "python"
max_batch_size: 0
input [{ name: "X" data_type: TYPE_FP32 dims: [-1] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [-1] }]
response_cache { enable: true }
"""

SCALE = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
                                                            * {factor})]) for r in requests]
"""


def _x() -> list[grpcclient.InferInput]:
    x = grpcclient.InferInput("X", [1], "FP32")
    x.set_data_from_numpy(np.array([1.0], dtype=np.float32))
    return [x]


def _counts(client) -> dict[str, int]:
    stats = client.get_inference_statistics("cached", as_json=True)["model_stats"][0]["inference_stats"]
    return {k: int(stats.get(k, {}).get("count", 0)) for k in ("success", "cache_hit", "cache_miss")}


def test_a_reloaded_model_does_not_answer_from_its_predecessors_cache_entries(tmp_path: Path):
    """Same name, same version, other code (a reload, or an unload and a load): its answers are computed again, not
    the old model's cached ones (the key named the model and version only, so the old answers came back)."""
    model = tmp_path / "cached"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CACHED_CONFIG)
    (model / "1" / "model.py").write_text(SCALE.format(factor=2))
    with serve("--model-repository", str(tmp_path), "--model-control-mode", "explicit", "--load-model", "cached",
               "--cache-config", "local,size=1048576") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        assert [client.infer("cached", _x()).as_numpy("Y").tolist() for _ in range(2)] == [[2.0], [2.0]]
        assert _counts(client) == {"success": 2, "cache_hit": 1, "cache_miss": 1}
        (model / "1" / "model.py").write_text(SCALE.format(factor=3))
        client.load_model("cached")
        assert [client.infer("cached", _x()).as_numpy("Y").tolist() for _ in range(2)] == [[3.0], [3.0]]
        assert _counts(client) == {"success": 2, "cache_hit": 1, "cache_miss": 1}  # (the new model's own)
        (model / "1" / "model.py").write_text(SCALE.format(factor=4))
        client.unload_model("cached")
        client.load_model("cached")
        assert client.infer("cached", _x()).as_numpy("Y").tolist() == [4.0]
        client.close()


@pytest.fixture(scope="module")
def queued():
    """A callable with 2 priority levels and a bounded queue."""
    with serve("tests.models:gated_identity", *IDENTITY, "--max-batch-size", "4", "--dynamic-batching",
               "--priority-levels", "2", "--default-priority-level", "1", "--max-queue-size", "4",
               "--allow-timeout-override") as server:
        yield server


def _post(server, parameters: dict) -> tuple[int, str]:
    body = json.dumps({"parameters": parameters,
                       "inputs": [{"name": "IN_X", "datatype": "INT32", "shape": [1, 1], "data": [1]}]})
    host, port = server.http_url.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=20)
    try:
        conn.request("POST", "/v2/models/gated_identity/infer", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read()).get("error", "")
    finally:
        conn.close()


@pytest.mark.parametrize("key", ["priority", "timeout"])
@pytest.mark.parametrize("value", [-1, 1.5, "1", True, 2**64, None, [1]])
def test_http_priority_and_timeout_that_are_no_unsigned_integers_are_refused(queued, key, value):
    assert _post(queued, {key: value}) == (
        500, f"Unable to parse '{key}': attempt to access JSON non-unsigned-integer as unsigned-integer")


@pytest.mark.parametrize("parameters", [{"priority": 0}, {"priority": 2}, {"priority": 3}, {"priority": 2**63},
                                        {"timeout": 0}, {"timeout": 10**18}, {"timeout": 2**64 - 1}])
def test_http_priority_and_timeout_in_range_are_served(queued, parameters):
    assert _post(queued, parameters) == (200, "")


def test_a_region_overwritten_after_the_lookup_does_not_poison_the_cache(tmp_path: Path):
    """An attacker sends X=1 from its region, overwrites the region with 2 once the key (of 1) was taken and before
    the model reads it: the answer was stored under the key of 1, and a victim sending 1 inline got 2. The model now
    computes from the bytes the key was taken of."""
    started, release = tmp_path / "started", tmp_path / "release"
    parameters = {"started": str(started), "release": str(release)}
    with serve("tests.models:gated_identity", *IDENTITY, "--response-cache",
               "--cache-config", "local,size=1048576") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        key = f"/a4poison_{uuid.uuid4().hex}"
        handle = shm.create_shared_memory_region("poison", key, 4)
        try:
            shm.set_shared_memory_region(handle, [np.array([1], dtype=np.int32)])
            client.register_system_shared_memory("poison", key, 4)
            tensor = grpcclient.InferInput("IN_X", [1], "INT32")
            tensor.set_shared_memory("poison", 4)
            answers: queue.Queue = queue.Queue()
            client.async_infer("gated_identity", [tensor], parameters=parameters,
                               callback=lambda result, error: answers.put((result, error)))
            deadline = time.monotonic() + 20
            while not started.exists():
                assert time.monotonic() < deadline, "the request never started"
                time.sleep(0.01)
            shm.set_shared_memory_region(handle, [np.array([2], dtype=np.int32)])  # after the lookup
            release.touch()
            result, error = answers.get(timeout=20)
            assert error is None and result.as_numpy("OUT_X").tolist() == [1]  # what its key says
            inline = grpcclient.InferInput("IN_X", [1], "INT32")
            inline.set_data_from_numpy(np.array([1], dtype=np.int32))
            victim = client.infer("gated_identity", [inline], parameters=parameters)
            assert victim.as_numpy("OUT_X").tolist() == [1]
            client.unregister_system_shared_memory()
        finally:
            shm.destroy_shared_memory_region(handle)
            release.touch()
        client.close()
