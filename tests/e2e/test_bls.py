"""BLS: Python-backend models (tests/repositories/bls) calling other models of the server with pb_utils
`InferenceRequest.exec()`, `async_exec()` and `exec(decoupled=True)`; a repository model and a callable as callees;
unknown models, failing callees and a model calling itself answered with clear errors; checked with the real
tritonclient over gRPC and HTTP."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.conftest import REPO, serve, tensor_args

REPOS = REPO / "tests" / "repositories"
CLIENTS = {"grpc": grpcclient, "http": httpclient}


@pytest.fixture(scope="module")
def server():
    """The `models` and `bls` repositories beside a callable (tests.models:add_sub, as add_sub_callable)."""
    callable_args = ["--model-name", "add_sub_callable", "--max-batch-size", "8",
                     *tensor_args("input", [("INPUT0", "fp32", "-1"), ("INPUT1", "fp32", "-1")]),
                     *tensor_args("output", [("OUTPUT0", "fp32", "-1"), ("OUTPUT1", "fp32", "-1")])]
    with serve("tests.models:add_sub", *callable_args, "--model-repository", str(REPOS / "models"),
               "--model-repository", str(REPOS / "bls")) as s:
        yield s


def infer(server, protocol: str, model: str, a: np.ndarray, b: np.ndarray, **parameters):
    client = CLIENTS[protocol].InferenceServerClient(server.grpc_url if protocol == "grpc" else server.http_url)
    inputs = []
    for name, array in (("INPUT0", a), ("INPUT1", b)):
        tensor = CLIENTS[protocol].InferInput(name, list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return client.infer(model, inputs, parameters=parameters or None)


A = np.arange(8, dtype=np.float32).reshape(2, 4)
B = np.full((2, 4), 3, dtype=np.float32)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
@pytest.mark.parametrize("target", ["add_sub", "add_sub_callable"])
def test_exec_calls_a_repository_model_and_a_callable(server, protocol, target):
    result = infer(server, protocol, "bls_sync", A, B, target=target)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_large_tensors_travel_through_shared_memory(server, protocol):
    """1 MiB inputs and outputs: past the inline limit, both ways go through the arenas (and come back each time)."""
    a = np.random.default_rng(0).random((1, 1 << 18), dtype=np.float32)
    b = np.ones_like(a)
    for _ in range(20):
        result = infer(server, protocol, "bls_sync", a, b, target="add_sub_callable")
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_async_exec_from_async_execute(server, protocol):
    result = infer(server, protocol, "bls_async", A, B)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_exec_decoupled_iterates_over_the_stream(server, protocol):
    client = CLIENTS[protocol].InferenceServerClient(server.grpc_url if protocol == "grpc" else server.http_url)
    values = np.array([4, 5, 6], dtype=np.int32)
    tensor = CLIENTS[protocol].InferInput("IN", [3], "INT32")
    tensor.set_data_from_numpy(values)
    result = client.infer("bls_decoupled", [tensor])
    assert result.as_numpy("SUM").tolist() == [15]
    assert result.as_numpy("COUNT").tolist() == [4]  # three responses and the empty final one


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_unknown_model_is_an_error_response(server, protocol):
    with pytest.raises(InferenceServerException) as info:
        infer(server, protocol, "bls_sync", A, B, target="no_such_model")
    assert "[code 2] Request for unknown model: 'no_such_model' is not found" in info.value.message()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_callee_error_is_an_error_response(server, protocol):
    with pytest.raises(InferenceServerException) as info:
        infer(server, protocol, "bls_sync", A, B, target="fails")
    message = info.value.message()
    assert "[code 1]" in message and "fails on purpose" in message, message


def test_a_model_calling_itself_with_one_instance_fails_at_once(server):
    with pytest.raises(InferenceServerException) as info:
        infer(server, "grpc", "bls_sync", A, B, target="bls_sync")
    assert "model 'bls_sync' has one instance" in info.value.message()


def test_server_still_serves_after_the_errors(server):
    result = infer(server, "grpc", "bls_sync", A, B)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)
