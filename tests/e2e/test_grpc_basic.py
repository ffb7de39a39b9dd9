"""Basic end-to-end behaviour over gRPC: health, metadata, config, a batched model, statistics."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.serving import serve, tensor_args

ADD_SUB = ["--max-batch-size", "8"] + tensor_args(
    "input", [("INPUT0", "int32", "16"), ("INPUT1", "int32", "16")]
) + tensor_args("output", [("OUTPUT0", "int32", "16"), ("OUTPUT1", "int32", "16")])


@pytest.fixture(scope="module")
def add_sub_server():
    with serve("tests.models:add_sub", *ADD_SUB) as server:
        yield server


def make_inputs(a: np.ndarray, b: np.ndarray) -> list[grpcclient.InferInput]:
    inputs = []
    for name, array in (("INPUT0", a), ("INPUT1", b)):
        tensor = grpcclient.InferInput(name, list(array.shape), "INT32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def test_health_and_metadata(add_sub_server):
    client = grpcclient.InferenceServerClient(add_sub_server.grpc_url)
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("add_sub")
    assert client.is_model_ready("add_sub", "1")
    meta = client.get_server_metadata(as_json=True)
    assert meta["name"] == "triton"
    assert "statistics" in meta["extensions"]
    model = client.get_model_metadata("add_sub", as_json=True)
    assert model["versions"] == ["1"]
    assert [i["shape"] for i in model["inputs"]] == [["-1", "16"], ["-1", "16"]]
    assert [o["datatype"] for o in model["outputs"]] == ["INT32", "INT32"]


def test_model_config(add_sub_server):
    client = grpcclient.InferenceServerClient(add_sub_server.grpc_url)
    config = client.get_model_config("add_sub", as_json=True)["config"]
    assert config["name"] == "add_sub"
    assert config["max_batch_size"] == 8
    assert [i["data_type"] for i in config["input"]] == ["TYPE_INT32", "TYPE_INT32"]
    assert [o["dims"] for o in config["output"]] == [["16"], ["16"]]
    assert "model_transaction_policy" not in config  # (a decoupled model's alone, as Triton 2.51 shows it)


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_add_sub_batches(add_sub_server, batch):
    client = grpcclient.InferenceServerClient(add_sub_server.grpc_url)
    a = np.arange(16 * batch, dtype=np.int32).reshape(batch, 16)
    b = np.full((batch, 16), 7, dtype=np.int32)
    result = client.infer("add_sub", make_inputs(a, b))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert result.get_response().model_version == "1"


def test_requested_output_subset(add_sub_server):
    client = grpcclient.InferenceServerClient(add_sub_server.grpc_url)
    a = np.ones((1, 16), dtype=np.int32)
    result = client.infer(
        "add_sub", make_inputs(a, a), outputs=[grpcclient.InferRequestedOutput("OUTPUT1")], request_id="r1"
    )
    response = result.get_response()
    assert [o.name for o in response.outputs] == ["OUTPUT1"]
    assert response.id == "r1"
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - a)


def test_statistics_count_requests(add_sub_server):
    client = grpcclient.InferenceServerClient(add_sub_server.grpc_url)
    before = client.get_inference_statistics("add_sub", as_json=True)["model_stats"][0]
    a = np.ones((2, 16), dtype=np.int32)
    for _ in range(3):
        client.infer("add_sub", make_inputs(a, a))
    stats = client.get_inference_statistics("add_sub", as_json=True)["model_stats"][0]
    success = int(stats["inference_stats"]["success"]["count"]) - int(
        before["inference_stats"].get("success", {}).get("count", 0)
    )
    assert success == 3
    assert stats["inference_stats"]["queue"]["count"] == stats["inference_stats"]["success"]["count"]
    assert int(stats["inference_count"]) - int(before.get("inference_count", 0)) == 6
    assert int(stats["execution_count"]) - int(before.get("execution_count", 0)) == 3
    assert any(b["batch_size"] == "2" for b in stats["batch_stats"])
    every = client.get_inference_statistics(as_json=True)["model_stats"]
    assert [m["name"] for m in every] == ["add_sub"]


def test_repository_index_and_no_explicit_load(add_sub_server):
    client = grpcclient.InferenceServerClient(add_sub_server.grpc_url)
    index = client.get_model_repository_index(as_json=True)
    assert index["models"] == [{"name": "add_sub", "version": "1", "state": "READY"}]
    for call in (lambda: client.load_model("add_sub"), lambda: client.unload_model("add_sub")):
        with pytest.raises(InferenceServerException) as info:
            call()
        assert info.value.status() == "StatusCode.UNAVAILABLE"
        assert info.value.message() == "explicit model load / unload is not allowed if polling is enabled"
