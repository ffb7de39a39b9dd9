"""Request validation through tritonclient, over gRPC and over HTTP: the same refusal carries Triton's same message
on both; only the status differs (a per-protocol table, `STATUS`), and the server keeps serving. What only one
protocol can send (hand-built `ModelInferRequest`s, raw HTTP bodies, routes, transport):
tests/e2e/test_grpc_validation.py and tests/e2e/test_http_validation.py."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, PROTOCOLS, client_for
from tests._support.serving import lazy_servers, tensor_args

P = "[request id: <id_unknown>] "
NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended "
    "to each input shape. If you want to specify the full shape including the batch dim in your input dims "
    "config, try setting max_batch_size to zero. See the model configuration docs for more info on max_batch_size."
)
TIMEOUT_S = 30
# What tritonclient's InferenceServerException.status() says for each kind of refusal.
STATUS = {
    "grpc": {"not found": "StatusCode.NOT_FOUND", "invalid": "StatusCode.INVALID_ARGUMENT",
             "internal": "StatusCode.INTERNAL"},
    "http": {"not found": "404", "invalid": "400", "internal": "500"},
}

BAD_CALLABLES = ["raises", "wrong_dtype", "wrong_shape", "unknown_output", "not_a_list"]
FP32_4 = tensor_args("input", [("INPUT", "fp32", "4")]) + tensor_args("output", [("OUTPUT", "fp32", "4")])
SERVERS: dict[str, tuple[str, list[str]]] = {
    # batching model with two inputs: INPUT0/INPUT1 INT32 [-1,16]
    "add_sub": (
        "tests.models:add_sub",
        ["--max-batch-size", "8"]
        + tensor_args("input", [("INPUT0", "int32", "16"), ("INPUT1", "int32", "16")])
        + tensor_args("output", [("OUTPUT0", "int32", "16"), ("OUTPUT1", "int32", "16")]),
    ),
    # non-batching model: INPUT FP32 [4], TEXT BYTES [2]; answers with its request parameters
    "echo_parameters": (
        "tests.models:echo_parameters",
        tensor_args("input", [("INPUT", "fp32", "4"), ("TEXT", "bytes", "2")])
        + tensor_args("output", [("PARAMS", "bytes", "1")]),
    ),
    **{name: (f"tests.models:{name}", FP32_4) for name in BAD_CALLABLES},
}


@pytest.fixture(scope="module")
def servers():
    """Servers of this module by name, each started the first time a test asks for it (about a second each)."""
    yield from lazy_servers(SERVERS)


@pytest.fixture(params=PROTOCOLS)
def protocol(request) -> str:
    return request.param


def connect(server, protocol: str) -> Any:
    return client_for(server, protocol, **({"network_timeout": TIMEOUT_S} if protocol == "http" else {}))


@pytest.fixture
def add_sub(servers, protocol) -> Iterator[Any]:
    with connect(servers["add_sub"], protocol) as client:
        yield client


@pytest.fixture
def echo(servers, protocol) -> Iterator[Any]:
    with connect(servers["echo_parameters"], protocol) as client:
        yield client


def int_input(protocol: str, name: str, shape: list[int], datatype: str = "INT32") -> Any:
    tensor = CLIENTS[protocol].InferInput(name, shape, datatype)
    dtype = {"INT32": np.int32, "FP32": np.float32, "INT64": np.int64}[datatype]
    tensor.set_data_from_numpy(np.ones(shape, dtype=dtype))
    return tensor


def good_inputs(protocol: str, batch: int = 1) -> list[Any]:
    return [int_input(protocol, "INPUT0", [batch, 16]), int_input(protocol, "INPUT1", [batch, 16])]


def outputs(protocol: str, *names: str) -> list[Any]:
    return [CLIENTS[protocol].InferRequestedOutput(name) for name in names]


def echo_inputs(protocol: str, x_shape: list[int] | None = None) -> list[Any]:
    shape = [4] if x_shape is None else x_shape
    x = CLIENTS[protocol].InferInput("INPUT", shape, "FP32")
    x.set_data_from_numpy(np.zeros(shape, dtype=np.float32))
    text = CLIENTS[protocol].InferInput("TEXT", [2], "BYTES")
    text.set_data_from_numpy(np.array([b"a", b""], dtype=np.object_))
    return [x, text]


def check_add_sub_serves(client: Any, protocol: str) -> None:
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    b = np.full((2, 16), 3, dtype=np.int32)
    inputs = []
    for name, array in (("INPUT0", a), ("INPUT1", b)):
        tensor = CLIENTS[protocol].InferInput(name, [2, 16], "INT32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = client.infer("add_sub", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def check_echo_serves(client: Any, protocol: str) -> None:
    result = client.infer("echo_parameters", echo_inputs(protocol), parameters={"k": 1})
    assert result.as_numpy("PARAMS").tolist() == [b"k=1"]


def model_version(result: Any, protocol: str) -> str:
    response = result.get_response()
    return response.model_version if protocol == "grpc" else response["model_version"]


def expect_error(call: Callable[[], Any], protocol: str, kind: str, message: str | re.Pattern) -> str:
    """`call` fails with the `protocol`'s status for `kind` and exactly `message` (or a full match of the pattern)."""
    with pytest.raises(InferenceServerException) as info:
        call()
    got_status, got_message = info.value.status(), info.value.message()
    assert got_status == STATUS[protocol][kind], got_message
    if isinstance(message, re.Pattern):
        assert message.fullmatch(got_message), got_message
    else:
        assert got_message == message
    return got_message


# ---- model and version lookup ---------------------------------------------------------------------------------

def test_unknown_model(add_sub, protocol):
    message = "Request for unknown model: 'foo' is not found"
    expect_error(lambda: add_sub.infer("foo", good_inputs(protocol)), protocol, "not found", message)
    expect_error(lambda: add_sub.get_model_metadata("foo"), protocol, "not found", message)
    expect_error(lambda: add_sub.get_model_config("foo"), protocol, "not found", message)
    check_add_sub_serves(add_sub, protocol)


def test_unknown_version(add_sub, protocol):
    message = "Request for unknown model: 'add_sub' version 99 is not found"
    expect_error(lambda: add_sub.infer("add_sub", good_inputs(protocol), model_version="99"), protocol, "not found",
                 message)
    expect_error(lambda: add_sub.get_model_metadata("add_sub", model_version="99"), protocol, "not found", message)
    result = add_sub.infer("add_sub", good_inputs(protocol), model_version="1")
    assert model_version(result, protocol) == "1"
    assert result.as_numpy("OUTPUT0").shape == (1, 16)


def test_unknown_model_is_not_ready(add_sub):
    """An unknown model or version is answered as not ready, as Triton 2.51 does (not as unknown)."""
    assert add_sub.is_model_ready("foo") is False
    assert add_sub.is_model_ready("add_sub", "3") is False
    assert add_sub.is_model_ready("add_sub", "99") is False
    assert add_sub.is_model_ready("add_sub")


# ---- inputs ---------------------------------------------------------------------------------------------------

def test_missing_input(add_sub, protocol):
    expect_error(
        lambda: add_sub.infer("add_sub", [int_input(protocol, "INPUT0", [1, 16])]), protocol, "invalid",
        P + "expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], but missing required "
        "input(s) ['INPUT1']. Please provide all required input(s).",
    )
    for request_id, prefix in (("", P), ("my-id", "[request id: my-id] ")):
        expect_error(
            lambda: add_sub.infer("add_sub", [], request_id=request_id), protocol, "invalid",
            prefix + "expected 2 inputs but got 0 inputs for model 'add_sub'. Got input(s) [], but missing "
            "required input(s) ['INPUT0','INPUT1']. Please provide all required input(s).",
        )
    check_add_sub_serves(add_sub, protocol)


def test_too_many_inputs(add_sub, protocol):
    inputs = good_inputs(protocol) + [int_input(protocol, "INPUTX", [1, 16])]
    expect_error(
        lambda: add_sub.infer("add_sub", inputs), protocol, "invalid",
        re.compile(
            re.escape(P + "expected 2 inputs but got 3 inputs for model 'add_sub'. Got input(s) [")
            + r"('(INPUT0|INPUT1|INPUTX)',?){3}"
            + re.escape("], but missing required input(s) ]. Please provide all required input(s).")
        ),
    )
    check_add_sub_serves(add_sub, protocol)


def test_unexpected_input(add_sub, protocol):
    inputs = [int_input(protocol, "INPUT0", [1, 16]), int_input(protocol, "INPUTX", [1, 16])]
    expect_error(lambda: add_sub.infer("add_sub", inputs), protocol, "invalid",
                 "unexpected inference input 'INPUTX' for model 'add_sub'")
    check_add_sub_serves(add_sub, protocol)


def test_wrong_datatype(add_sub, protocol):
    inputs = [int_input(protocol, "INPUT0", [1, 16], "FP32"), int_input(protocol, "INPUT1", [1, 16])]
    expect_error(lambda: add_sub.infer("add_sub", inputs), protocol, "invalid",
                 P + "inference input 'INPUT0' data-type is 'FP32', but model 'add_sub' expects 'INT32'")
    check_add_sub_serves(add_sub, protocol)


def shape_text(shape: list[int]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


@pytest.mark.parametrize("shape, other", [([1, 15], [1, 16]), ([4], [4, 16]), ([2, 16, 1], [2, 16]),
                                          ([1, 16, 1], [1, 16]), ([16], [1, 16])])
def test_wrong_shape_batching(add_sub, protocol, shape, other):
    """INPUT0 of `shape` next to INPUT1 of `other`."""
    expected = (P + f"unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [-1,16], "
                f"got {shape_text(shape)}. " + NOTE)
    if shape == [16]:  # the first dim is taken as the batch size, which then differs from INPUT1's
        expected = f"{P}input 'INPUT1' batch size does not match other inputs for 'add_sub'"
    inputs = [int_input(protocol, "INPUT0", shape), int_input(protocol, "INPUT1", other)]
    expect_error(lambda: add_sub.infer("add_sub", inputs), protocol, "invalid", expected)
    check_add_sub_serves(add_sub, protocol)


@pytest.mark.parametrize("shape", [[5], [1, 4], []])
def test_wrong_shape_non_batching(echo, protocol, shape):
    expect_error(
        lambda: echo.infer("echo_parameters", echo_inputs(protocol, shape)), protocol, "invalid",
        P + f"unexpected shape for input 'INPUT' for model 'echo_parameters'. Expected [4], got {shape_text(shape)}. ",
    )
    check_echo_serves(echo, protocol)


@pytest.mark.parametrize("batch", [9, 100])
def test_batch_size_too_large(add_sub, protocol, batch):
    expect_error(lambda: add_sub.infer("add_sub", good_inputs(protocol, batch)), protocol, "invalid",
                 P + "inference request batch-size must be <= 8 for 'add_sub'")
    assert add_sub.infer("add_sub", good_inputs(protocol, 8)).as_numpy("OUTPUT0").shape == (8, 16)


def test_batch_size_mismatch(add_sub, protocol):
    inputs = [int_input(protocol, "INPUT0", [2, 16]), int_input(protocol, "INPUT1", [3, 16])]
    expect_error(lambda: add_sub.infer("add_sub", inputs), protocol, "invalid",
                 P + "input 'INPUT1' batch size does not match other inputs for 'add_sub'")
    check_add_sub_serves(add_sub, protocol)


@pytest.mark.parametrize("names", [["INPUT0", "INPUT0", "INPUT1"], ["INPUT0", "INPUT1", "INPUT0"]])
def test_duplicate_input(add_sub, protocol, names):
    inputs = [int_input(protocol, name, [1, 16]) for name in names]
    expect_error(lambda: add_sub.infer("add_sub", inputs), protocol, "invalid",
                 P + "input 'INPUT0' already exists in request")
    check_add_sub_serves(add_sub, protocol)


# ---- requested outputs ----------------------------------------------------------------------------------------

def test_an_output_asked_for_twice_is_answered_once(add_sub, protocol):
    """As tritonserver 2.51 (seen on the same request over both protocols): no refusal, the output once. Twice in a
    row: the second request's header is a known layout over gRPC, checked without the full validation."""
    for _ in range(2):
        result = add_sub.infer("add_sub", good_inputs(protocol),
                               outputs=outputs(protocol, "OUTPUT0", "OUTPUT1", "OUTPUT0"))
        answer = result.get_response()
        names = [o["name"] for o in answer["outputs"]] if protocol == "http" else [o.name for o in answer.outputs]
        assert names == ["OUTPUT0", "OUTPUT1"]
        assert result.as_numpy("OUTPUT0").tolist() == [[2] * 16]


def test_unknown_requested_output(add_sub, protocol):
    expect_error(
        lambda: add_sub.infer("add_sub", good_inputs(protocol), outputs=outputs(protocol, "OUTPUT0", "OUTPUTX")),
        protocol, "invalid", "unexpected inference output 'OUTPUTX' for model 'add_sub'",
    )
    check_add_sub_serves(add_sub, protocol)


def test_unknown_requested_output_is_checked_before_inputs(add_sub, protocol):
    expect_error(lambda: add_sub.infer("add_sub", [], outputs=outputs(protocol, "OUTPUTX")), protocol, "invalid",
                 "unexpected inference output 'OUTPUTX' for model 'add_sub'")


# ---- callables that fail --------------------------------------------------------------------------------------

def fp32_input(protocol: str) -> list[Any]:
    tensor = CLIENTS[protocol].InferInput("INPUT", [4], "FP32")
    tensor.set_data_from_numpy(np.arange(4, dtype=np.float32))
    return [tensor]


FAILURE_PATTERNS = {
    "raises": r"ValueError: the callable failed on purpose.*",
    "wrong_dtype": r".*'OUTPUT'.*(FP64|float64).*",
    "wrong_shape": r".*'OUTPUT'.*shape.*",
    "unknown_output": r".*'NOPE'.*",
    "not_a_list": r".*list.*",
}


@pytest.mark.parametrize("name", BAD_CALLABLES)
def test_failing_callable(servers, protocol, name):
    pattern = re.compile(
        re.escape("Failed to process the request(s) for model '") + r"[^']*" + re.escape("', message: ")
        + FAILURE_PATTERNS[name],
        re.DOTALL,
    )
    with connect(servers[name], protocol) as client:
        failures_before = _failures(client, protocol, name)
        for _ in range(2):  # the worker survives and fails the same way again
            message = expect_error(lambda: client.infer(name, fp32_input(protocol)), protocol, "internal", pattern)
            assert name in message
        if name == "raises":
            assert "the callable failed on purpose" in message
        assert client.is_server_live()
        assert client.is_model_ready(name)
        stats = _stats(client, protocol, name)
        assert int(stats["inference_stats"]["fail"]["count"]) >= failures_before + 2
        assert int(stats["inference_stats"].get("success", {}).get("count", 0)) == 0


def _stats(client: Any, protocol: str, model: str) -> dict:
    stats = client.get_inference_statistics(model, as_json=True) if protocol == "grpc" else \
        client.get_inference_statistics(model)
    return stats["model_stats"][0]


def _failures(client: Any, protocol: str, model: str) -> int:
    return int(_stats(client, protocol, model)["inference_stats"].get("fail", {}).get("count", 0))


# ---- parameters reach the callable ----------------------------------------------------------------------------

@pytest.mark.parametrize("parameters, seen", [
    ({"s": "text", "i": -7, "big": 2**62, "b": True, "f": False, "d": 2.5, "empty": ""},
     "b=True;big=4611686018427387904;d=2.5;empty='';f=False;i=-7;s='text'"),
    ({"a": 1, "b": True, "c": "x", "d": 0.5}, "a=1;b=True;c='x';d=0.5"),
    (None, ""),
])
def test_parameters_reach_the_callable(echo, protocol, parameters, seen):
    result = echo.infer("echo_parameters", echo_inputs(protocol), parameters=parameters)
    assert result.as_numpy("PARAMS").tolist() == [seen.encode()]


def test_parameters_reach_the_callable_with_requested_outputs(echo, protocol):
    """A requested output's own parameters (binary_data, classification, shm) are not the request's."""
    result = echo.infer("echo_parameters", echo_inputs(protocol), outputs=outputs(protocol, "PARAMS"),
                        parameters={"s": "text"})
    assert result.as_numpy("PARAMS").tolist() == [b"s='text'"]


# ---- still serving --------------------------------------------------------------------------------------------

def test_still_serving_after_all_errors(add_sub, echo, protocol):
    check_add_sub_serves(add_sub, protocol)
    check_echo_serves(echo, protocol)
    assert add_sub.is_server_ready()
    assert int(_stats(add_sub, protocol, "add_sub")["inference_stats"]["success"]["count"]) >= 1
