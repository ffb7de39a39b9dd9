"""Request validation over gRPC only: Triton's status codes and exact messages, and the server keeps serving.

Requests come as hand-built `ModelInferRequest`s (sent with the generated stub) where tritonclient would refuse or
compute sizes itself, and from tritonclient for what only gRPC has (typed contents, shared-memory parameters, the
stream). The refusals tritonclient can ask for over both protocols: tests/e2e/test_validation.py.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests._support.serving import lazy_servers, tensor_args

P = "[request id: <id_unknown>] "
TIMEOUT_S = 30

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
}


@pytest.fixture(scope="module")
def servers():
    """Servers of this module by name, each started the first time a test asks for it (about a second each)."""
    yield from lazy_servers(SERVERS)


class Target:
    """A tritonclient client and a raw stub on one server, and a known-good request for it."""

    def __init__(self, server):
        self.url = server.grpc_url
        self.client = grpcclient.InferenceServerClient(self.url)
        self.channel = grpc.insecure_channel(self.url)
        self.stub = service_pb2_grpc.GRPCInferenceServiceStub(self.channel)

    def close(self) -> None:
        self.client.close()
        self.channel.close()


@pytest.fixture(scope="module")
def add_sub(servers):
    target = Target(servers["add_sub"])
    yield target
    target.close()


@pytest.fixture(scope="module")
def echo(servers):
    target = Target(servers["echo_parameters"])
    yield target
    target.close()


def int_input(name: str, shape: list[int], datatype: str = "INT32") -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, shape, datatype)
    dtype = {"INT32": np.int32, "FP32": np.float32, "INT64": np.int64}[datatype]
    tensor.set_data_from_numpy(np.ones(shape, dtype=dtype))
    return tensor


def good_inputs(batch: int = 1) -> list[grpcclient.InferInput]:
    return [int_input("INPUT0", [batch, 16]), int_input("INPUT1", [batch, 16])]


def check_add_sub_serves(target: Target) -> None:
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    b = np.full((2, 16), 3, dtype=np.int32)
    inputs = []
    for name, array in (("INPUT0", a), ("INPUT1", b)):
        tensor = grpcclient.InferInput(name, [2, 16], "INT32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = target.client.infer("add_sub", inputs, client_timeout=TIMEOUT_S)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def echo_inputs(x_shape: list[int] | None = None) -> list[grpcclient.InferInput]:
    shape = [4] if x_shape is None else x_shape
    x = grpcclient.InferInput("INPUT", shape, "FP32")
    x.set_data_from_numpy(np.zeros(shape, dtype=np.float32))
    text = grpcclient.InferInput("TEXT", [2], "BYTES")
    text.set_data_from_numpy(np.array([b"a", b""], dtype=np.object_))
    return [x, text]


def check_echo_serves(target: Target) -> None:
    result = target.client.infer("echo_parameters", echo_inputs(), parameters={"k": 1}, client_timeout=TIMEOUT_S)
    assert result.as_numpy("PARAMS").tolist() == [b"k=1"]


def expect_error(call: Callable[[], Any], status: str, message: str | re.Pattern) -> str:
    """`call` fails with gRPC status `status` and exactly `message` (or a full match of the pattern)."""
    with pytest.raises((InferenceServerException, grpc.RpcError)) as info:
        call()
    error = info.value
    if isinstance(error, InferenceServerException):
        got_status, got_message = error.status(), error.message()
    else:
        got_status, got_message = str(error.code()), error.details()
    assert got_status == f"StatusCode.{status}", got_message
    if isinstance(message, re.Pattern):
        assert message.fullmatch(got_message), got_message
    else:
        assert got_message == message
    return got_message


def raw_request(model: str, tensors: list[tuple[str, str, list[int], bytes | None]], **fields) -> Any:
    """ModelInferRequest with the given inputs; raw bytes go to raw_input_contents in order (None: none)."""
    request = service_pb2.ModelInferRequest(model_name=model, **fields)
    for name, datatype, shape, raw in tensors:
        request.inputs.add(name=name, datatype=datatype, shape=shape)
        if raw is not None:
            request.raw_input_contents.append(raw)
    return request


def add_sub_request(model: str = "add_sub", **fields) -> Any:
    ones = np.ones((1, 16), dtype=np.int32).tobytes()
    return raw_request(model, [("INPUT0", "INT32", [1, 16], ones), ("INPUT1", "INT32", [1, 16], ones)], **fields)


def raw_infer(target: Target, request: Any) -> Any:
    return target.stub.ModelInfer(request, timeout=TIMEOUT_S)


# ---- model lookup ---------------------------------------------------------------------------------------------

def test_unknown_model_is_not_ready_on_the_stub(add_sub):
    """ModelReady answers `ready: false` for an unknown model, as Triton 2.51 does (not NOT_FOUND); through
    tritonclient, for both protocols: tests/e2e/test_validation.py."""
    assert add_sub.stub.ModelReady(service_pb2.ModelReadyRequest(name="foo"), timeout=TIMEOUT_S).ready is False
    assert add_sub.client.is_model_ready("add_sub")


@pytest.mark.parametrize(
    "version, message",
    [
        ("abc", "failed to get model version from specified version string 'abc' (details: stol), "
                "version should be an integral value > 0"),
        ("-1", "invalid model version specified '-1' , version should be an integral value > 0"),
    ],
)
def test_bad_version_string(add_sub, version, message):
    """Triton parses the version with std::stol (what() is 'stol'); a negative number has its own message."""
    expect_error(lambda: add_sub.client.infer("add_sub", good_inputs(), model_version=version), "INVALID_ARGUMENT",
                 message)
    expect_error(lambda: add_sub.client.is_model_ready("add_sub", version), "INVALID_ARGUMENT", message)
    check_add_sub_serves(add_sub)


def test_unknown_model_is_checked_before_the_data(add_sub):
    """Triton looks the model up before it reads any tensor data."""
    request = raw_request("foo", [("INPUT0", "INT32", [1, 16], None)])
    expect_error(lambda: raw_infer(add_sub, request), "NOT_FOUND", "Request for unknown model: 'foo' is not found")
    check_add_sub_serves(add_sub)


# ---- inputs ---------------------------------------------------------------------------------------------------

def test_unknown_datatype(add_sub):
    request = add_sub_request()
    request.inputs[1].datatype = "NOPE"
    expect_error(
        lambda: raw_infer(add_sub, request),
        "INVALID_ARGUMENT",
        P + "inference input 'INPUT1' data-type is '<invalid>', but model 'add_sub' expects 'INT32'",
    )
    check_add_sub_serves(add_sub)


def test_no_shape_for_batching_model(add_sub):
    request = add_sub_request()
    request.inputs[0].ClearField("shape")
    expect_error(
        lambda: raw_infer(add_sub, request),
        "INVALID_ARGUMENT",
        P + "input 'INPUT0' has no shape but model requires batch dimension for 'add_sub'",
    )
    check_add_sub_serves(add_sub)


# ---- tensor data ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [60, 68, 0])
def test_raw_byte_size_mismatch(add_sub, size):
    request = add_sub_request()
    request.raw_input_contents[0] = b"\0" * size
    expect_error(
        lambda: raw_infer(add_sub, request),
        "INVALID_ARGUMENT",
        P + f"input byte size mismatch for input 'INPUT0' for model 'add_sub'. Expected 64, got {size}",
    )
    check_add_sub_serves(add_sub)


def test_byte_size_mismatch_carries_request_id(add_sub):
    request = add_sub_request(id="req-7")
    request.raw_input_contents[1] = b"\0" * 128
    expect_error(
        lambda: raw_infer(add_sub, request),
        "INVALID_ARGUMENT",
        "[request id: req-7] input byte size mismatch for input 'INPUT1' for model 'add_sub'. Expected 64, got 128",
    )


def test_missing_raw_contents(add_sub):
    request = add_sub_request()
    del request.raw_input_contents[1]
    expect_error(
        lambda: raw_infer(add_sub, request),
        "INVALID_ARGUMENT",
        "unable to find data for input tensor 'INPUT1' for model 'add_sub' in request.",
    )
    check_add_sub_serves(add_sub)


def test_surplus_raw_contents_are_ignored(add_sub):
    request = add_sub_request()
    request.raw_input_contents.append(b"extra")
    response = raw_infer(add_sub, request)
    assert [o.name for o in response.outputs] == ["OUTPUT0", "OUTPUT1"]


def test_typed_contents_with_raw_contents(add_sub):
    request = add_sub_request()
    del request.raw_input_contents[0]
    request.inputs[0].contents.int_contents.extend([1] * 16)
    expect_error(
        lambda: raw_infer(add_sub, request),
        "INVALID_ARGUMENT",
        "contents field must not be specified when using raw_input_contents for 'INPUT0' for model 'add_sub'",
    )
    check_add_sub_serves(add_sub)


def typed_add_sub_request() -> Any:
    request = raw_request("add_sub", [("INPUT0", "INT32", [1, 16], None), ("INPUT1", "INT32", [1, 16], None)])
    for tensor in request.inputs:
        tensor.contents.int_contents.extend(range(16))
    return request


def test_typed_contents_are_accepted(add_sub):
    response = raw_infer(add_sub, typed_add_sub_request())
    result = grpcclient.InferResult(response)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * np.arange(16, dtype=np.int32).reshape(1, 16))


@pytest.mark.parametrize(
    "field, values, shown",
    [
        ("fp32_contents", [1.0] * 16, "FP32"),
        ("int64_contents", [1] * 16, "INT64"),
        ("uint_contents", [1] * 16, "UINT32"),
        ("bool_contents", [True] * 16, "BOOL"),
        ("bytes_contents", [b"a"] * 16, "BYTES"),
    ],
)
def test_typed_contents_of_wrong_type(add_sub, field, values, shown):
    request = typed_add_sub_request()
    request.inputs[0].contents.ClearField("int_contents")
    getattr(request.inputs[0].contents, field).extend(values)
    expect_error(
        lambda: raw_infer(add_sub, request),
        "INVALID_ARGUMENT",
        f"unexpected explicit tensor data for input tensor 'INPUT0' for model 'add_sub' of type '{shown}', "
        "expected datatype 'INT32'",
    )
    check_add_sub_serves(add_sub)


def test_typed_contents_in_two_fields(add_sub):
    request = typed_add_sub_request()
    request.inputs[1].contents.fp32_contents.extend([1.0] * 16)
    expect_error(
        lambda: raw_infer(add_sub, request),
        "INVALID_ARGUMENT",
        "unexpected explicit tensor data for input tensor 'INPUT1' for model 'add_sub', binary data was already "
        "supplied.",
    )
    check_add_sub_serves(add_sub)


def test_typed_contents_wrong_count(add_sub):
    request = typed_add_sub_request()
    request.inputs[1].contents.int_contents.append(99)
    expect_error(
        lambda: raw_infer(add_sub, request),
        "INVALID_ARGUMENT",
        P + "input byte size mismatch for input 'INPUT1' for model 'add_sub'. Expected 64, got 68",
    )


def bytes_request(elements: list[bytes], tail: bytes = b"") -> Any:
    raw = b"".join(len(e).to_bytes(4, "little") + e for e in elements) + tail
    return raw_request(
        "echo_parameters",
        [("INPUT", "FP32", [4], np.zeros(4, dtype=np.float32).tobytes()), ("TEXT", "BYTES", [2], raw)],
    )


BYTES_AT = "for inference input 'TEXT' for model 'echo_parameters'"


@pytest.mark.parametrize(
    "elements, tail, message",
    [
        ([b"a", b"b", b"c"], b"", f"unexpected number of string elements 3 {BYTES_AT}, expecting 2"),
        ([b"a"], b"", f"expected 2 string elements {BYTES_AT}, got 1"),
        ([], b"", f"expected 2 string elements {BYTES_AT}, got 0"),
        ([b"a"], b"\x01\x00",
         f"incomplete string length indicator {BYTES_AT}, expecting 4 bytes but only 2 bytes available. "
         "Please make sure the string length indicator is in one buffer."),
    ],
)
def test_bytes_element_count(echo, elements, tail, message):
    expect_error(lambda: raw_infer(echo, bytes_request(elements, tail)), "INVALID_ARGUMENT", P + message)
    check_echo_serves(echo)


def test_bytes_element_longer_than_the_buffer_is_refused(echo):
    """A last element that claims more bytes than remain: Triton's core only counts elements, its python backend (the
    one PyTriton's callables run in) refuses the request with this message; so do we, for every model."""
    request = bytes_request([b"a"], tail=(100).to_bytes(4, "little") + b"xyz")
    expect_error(lambda: raw_infer(echo, request), "INVALID_ARGUMENT",
                 "incomplete string data for inference input 'TEXT', expecting string of length 100 "
                 "but only 3 bytes available")
    check_echo_serves(echo)


# ---- request parameters ---------------------------------------------------------------------------------------

def param_request(key: str, kind: str, value: Any) -> Any:
    request = add_sub_request()
    param = request.parameters[key]
    if kind == "unset":
        param.SetInParent()
    else:
        setattr(param, kind, value)
    return request


RESERVED = (
    "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with "
    "'triton_' are allowed: triton_enable_empty_final_response"
)


@pytest.mark.parametrize(
    "key, kind, value, message",
    [
        ("triton_foo", "bool_param", True, RESERVED),
        ("triton_", "string_param", "x", RESERVED),
        ("triton_enable_empty_final_response", "string_param", "yes",
         "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param."),
        ("custom", "uint64_param", 5,
         "invalid value type for 'custom' parameter, expected int64_param, bool_param, or string_param."),
        ("custom", "unset", None,
         "invalid value type for 'custom' parameter, expected int64_param, bool_param, or string_param."),
        ("sequence_id", "bool_param", True,
         "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."),
        ("sequence_start", "int64_param", 1, "invalid value type for 'sequence_start' parameter, expected bool_param."),
        ("sequence_end", "string_param", "x", "invalid value type for 'sequence_end' parameter, expected bool_param."),
        ("priority", "int64_param", -1, "invalid value for 'priority', expected value >= 0."),
        ("priority", "double_param", 1.0,
         "invalid value type for 'priority' parameter, expected int64_param or uint64_param."),
        ("timeout", "uint64_param", 10, "invalid value type for 'timeout' parameter, expected int64_param."),
    ],
)
def test_bad_request_parameter(add_sub, key, kind, value, message):
    expect_error(lambda: raw_infer(add_sub, param_request(key, kind, value)), "INVALID_ARGUMENT", message)
    check_add_sub_serves(add_sub)


def test_reserved_parameter_allowed_key(add_sub):
    response = raw_infer(add_sub, param_request("triton_enable_empty_final_response", "bool_param", True))
    assert [o.name for o in response.outputs] == ["OUTPUT0", "OUTPUT1"]


def test_parameters_are_checked_before_the_data(add_sub):
    """Triton reads the request parameters before any tensor data."""
    request = param_request("custom", "uint64_param", 5)
    del request.raw_input_contents[:]
    expect_error(
        lambda: raw_infer(add_sub, request),
        "INVALID_ARGUMENT",
        "invalid value type for 'custom' parameter, expected int64_param, bool_param, or string_param.",
    )


# ---- shared-memory references ---------------------------------------------------------------------------------

def shm_request(params: dict[str, tuple[str, Any]], output: bool = False) -> Any:
    request = add_sub_request()
    if output:
        tensor = request.outputs.add(name="OUTPUT0")
    else:
        tensor = request.inputs[0]
        del request.raw_input_contents[0]
    for key, (kind, value) in params.items():
        setattr(tensor.parameters[key], kind, value)
    return request


@pytest.mark.parametrize("output", [False, True], ids=["input", "output"])
@pytest.mark.parametrize(
    "params, message",
    [
        ({"shared_memory_offset": ("int64_param", 0)},
         "'shared_memory_offset' can not be specified without 'shared_memory_region' parameter for tensor '{}'"),
        ({"shared_memory_byte_size": ("int64_param", 64)},
         "'shared_memory_byte_size' can not be specified without 'shared_memory_region' parameter for tensor '{}'"),
        ({"shared_memory_region": ("string_param", "r")},
         "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor '{}'"),
        ({"shared_memory_region": ("string_param", "r"), "shared_memory_offset": ("int64_param", 0)},
         "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor '{}'"),
        ({"shared_memory_region": ("int64_param", 1), "shared_memory_byte_size": ("int64_param", 64)},
         "invalid value type for 'shared_memory_region' parameter for tensor '{}', expected string_param."),
        ({"shared_memory_region": ("string_param", "r"), "shared_memory_byte_size": ("uint64_param", 64)},
         "invalid value type for 'shared_memory_byte_size' parameter for tensor '{}', expected int64_param."),
        ({"shared_memory_region": ("string_param", "r"), "shared_memory_byte_size": ("int64_param", 64),
          "shared_memory_offset": ("string_param", "0")},
         "invalid value type for 'shared_memory_offset' parameter for tensor '{}', expected int64_param."),
        # Triton checks the offset's type before it looks for the byte size.
        ({"shared_memory_region": ("string_param", "r"), "shared_memory_offset": ("bool_param", True)},
         "invalid value type for 'shared_memory_offset' parameter for tensor '{}', expected int64_param."),
    ],
)
def test_shared_memory_parameter_errors(add_sub, params, message, output):
    name = "OUTPUT0" if output else "INPUT0"
    expect_error(lambda: raw_infer(add_sub, shm_request(params, output)), "INVALID_ARGUMENT", message.format(name))
    check_add_sub_serves(add_sub)


def test_unregistered_region(add_sub):
    inputs = good_inputs()
    inputs[0].set_shared_memory("r", 64)
    expect_error(lambda: add_sub.client.infer("add_sub", inputs), "NOT_FOUND", "Unable to find shared memory region: 'r'")
    output = grpcclient.InferRequestedOutput("OUTPUT0")
    output.set_shared_memory("out-region", 64, offset=16)
    expect_error(
        lambda: add_sub.client.infer("add_sub", good_inputs(), outputs=[output]),
        "NOT_FOUND",
        "Unable to find shared memory region: 'out-region'",
    )
    check_add_sub_serves(add_sub)


def test_shared_memory_input_with_contents(add_sub):
    request = typed_add_sub_request()
    tensor = request.inputs[0]
    tensor.parameters["shared_memory_region"].string_param = "r"
    tensor.parameters["shared_memory_byte_size"].int64_param = 64
    expect_error(
        lambda: raw_infer(add_sub, request),
        "INVALID_ARGUMENT",
        "unexpected 'content' provided when using shared memory for input tensor 'INPUT0' for model 'add_sub'",
    )
    check_add_sub_serves(add_sub)


# ---- errors on the stream -------------------------------------------------------------------------------------

def test_errors_on_the_stream_keep_it_open(add_sub):
    """A failing request answers in-band (error_message) and the stream goes on serving."""
    bad = add_sub_request()
    del bad.raw_input_contents[1]
    good = add_sub_request(id="good")
    unknown = add_sub_request("foo")
    responses = list(add_sub.stub.ModelStreamInfer(iter([bad, unknown, good]), timeout=TIMEOUT_S))
    assert len(responses) == 3
    errors = sorted(r.error_message for r in responses if r.error_message)
    assert errors == [
        "Request for unknown model: 'foo' is not found",
        "unable to find data for input tensor 'INPUT1' for model 'add_sub' in request.",
    ]
    [ok] = [r.infer_response for r in responses if not r.error_message]
    assert ok.id == "good"
    assert ok.parameters["triton_final_response"].bool_param is True


def test_errors_on_the_stream_reach_the_tritonclient_callback(add_sub):
    import queue

    done: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(add_sub.url)
    client.start_stream(callback=lambda result, error: done.put((result, error)))
    try:
        client.async_stream_infer("add_sub", good_inputs(10))
        result, error = done.get(timeout=TIMEOUT_S)
        assert result is None
        assert error.message() == P + "inference request batch-size must be <= 8 for 'add_sub'"
        client.async_stream_infer("add_sub", good_inputs(2))
        result, error = done.get(timeout=TIMEOUT_S)
        assert error is None
        assert result.as_numpy("OUTPUT0").shape == (2, 16)
    finally:
        client.stop_stream()
        client.close()


# ---- parameters reach the callable ----------------------------------------------------------------------------

def test_parameters_reach_the_callable_over_the_stream(echo):
    request = bytes_request([b"a", b"b"])
    request.parameters["n"].int64_param = 3
    request.parameters["u"].string_param = "ünï"
    [response] = list(echo.stub.ModelStreamInfer(iter([request]), timeout=TIMEOUT_S))
    assert response.error_message == ""
    result = grpcclient.InferResult(response.infer_response)
    assert result.as_numpy("PARAMS").tolist() == ["n=3;u='ünï'".encode()]


# ---- still serving --------------------------------------------------------------------------------------------

def test_still_serving_after_all_errors(add_sub, echo):
    check_add_sub_serves(add_sub)
    check_echo_serves(echo)
    assert add_sub.client.is_server_ready()
    stats = add_sub.client.get_inference_statistics("add_sub", as_json=True)["model_stats"][0]
    assert int(stats["inference_stats"]["success"]["count"]) >= 1
