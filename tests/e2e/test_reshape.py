"""`reshape` on repository models' inputs and outputs, as in Triton: clients send and get the tensors' `dims`, the
model sees and returns `reshape.shape` (the batch dimension kept, variable sizes carried over); checked with
tritonclient over gRPC and HTTP."""

from __future__ import annotations

import numpy as np
import pytest

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve

REPOS = REPO / "tests" / "repositories"


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPOS / "reshape")) as s:
        yield s


def tensor(protocol: str, name: str, array: np.ndarray, datatype: str):
    t = CLIENTS[protocol].InferInput(name, list(array.shape), datatype)
    t.set_data_from_numpy(array)
    return t


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_batched_model_sees_the_reshape_and_clients_the_dims(server, protocol):
    client = client_for(server, protocol)
    x = np.arange(24, dtype=np.float32).reshape(2, 2, 6)  # batch 2, n = 2
    s = np.array([[1.0], [10.0]], dtype=np.float32)
    result = client.infer("reshape_batched", [tensor(protocol, "X", x, "FP32"), tensor(protocol, "S", s, "FP32")])
    assert result.as_numpy("SEEN").tolist() == [[2, 2, 2, 3, 2]] * 2  # X as [2, 2, 2, 3], S as [2]
    np.testing.assert_array_equal(result.as_numpy("Y"), x[:, 0])  # returned as [2, 2, 3], sent as dims [6]
    np.testing.assert_array_equal(result.as_numpy("Z"), x * s[:, :, None])
    assert result.as_numpy("Z").shape == (2, 2, 6)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_non_batched_model_sees_the_reshape(server, protocol):
    client = client_for(server, protocol)
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    result = client.infer("reshape_flat", [tensor(protocol, "X", x, "INT32")])
    np.testing.assert_array_equal(result.as_numpy("REVERSED"), x.reshape(6)[::-1].reshape(2, 3))


def test_config_shows_the_reshape_and_metadata_the_dims(server):
    client = client_for(server, "http")
    config = client.get_model_config("reshape_batched")
    assert [(t["name"], t["dims"], t.get("reshape")) for t in config["input"]] == [
        ("X", [-1, 6], {"shape": [-1, 2, 3]}), ("S", [1], {"shape": []})]
    metadata = client.get_model_metadata("reshape_batched")
    assert [(t["name"], t["shape"]) for t in metadata["inputs"]] == [("X", [-1, -1, 6]), ("S", [-1, 1])]
    assert [(t["name"], t["shape"]) for t in metadata["outputs"]] == [("SEEN", [-1, -1]), ("Y", [-1, 6]),
                                                                      ("Z", [-1, -1, 6])]
    grpc_config = client_for(server, "grpc").get_model_config("reshape_flat", as_json=True)["config"]
    assert grpc_config["output"][0]["reshape"] == {"shape": ["6"]}
