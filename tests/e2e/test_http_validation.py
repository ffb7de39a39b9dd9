"""Request validation and malformed requests over HTTP only: Triton's status codes and messages, `{"error": msg}`
bodies, and the server keeps serving.

Requests come raw (http.client or a socket) where tritonclient would refuse or compute sizes itself, and from
tritonclient.http for what only HTTP has. The refusals tritonclient can ask for over both protocols:
tests/e2e/test_validation.py.
"""

from __future__ import annotations

import gzip
import http.client
import json
import re
import socket
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, triton_to_np_dtype

from tests._support.http_raw import check_add_sub_serves
from tests._support.http_raw import read_response as _read_response
from tests._support.serving import lazy_servers, serve, tensor_args

P = "[request id: <id_unknown>] "
TIMEOUT_S = 30
MAX_INPUT = 100_000

IDENTITY_TYPES = ("BOOL", "INT8", "UINT8", "INT32", "INT64", "UINT64", "FP32", "FP64")
SERVERS: dict[str, tuple[str, list[str]]] = {
    # batching model with two inputs: INPUT0/INPUT1 INT32 [-1,16]
    "add_sub": (
        "tests.models:add_sub",
        ["--max-batch-size", "8", "--http-max-input-size", str(MAX_INPUT)]
        + tensor_args("input", [("INPUT0", "int32", "16"), ("INPUT1", "int32", "16")])
        + tensor_args("output", [("OUTPUT0", "int32", "16"), ("OUTPUT1", "int32", "16")]),
    ),
    # non-batching identity model, one input of each JSON kind: OUT_<X> = IN_<X>
    "identity": (
        "tests.models:identity",
        tensor_args("input", [(f"IN_{t}", t.lower(), "-1") for t in IDENTITY_TYPES])
        + tensor_args("output", [(f"OUT_{t}", t.lower(), "-1") for t in IDENTITY_TYPES]),
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
    yield from lazy_servers(SERVERS)


@pytest.fixture(scope="module")
def add_sub(servers):
    return servers["add_sub"]


@pytest.fixture(scope="module")
def echo(servers):
    return servers["echo_parameters"]


@pytest.fixture(scope="module")
def client(add_sub):
    c = httpclient.InferenceServerClient(add_sub.http_url, network_timeout=TIMEOUT_S)
    yield c
    c.close()


# ---- helpers ------------------------------------------------------------------------------------------------------

def int_input(name: str, shape: list[int], datatype: str = "INT32", binary: bool = True) -> httpclient.InferInput:
    tensor = httpclient.InferInput(name, shape, datatype)
    dtype = {"INT32": np.int32, "FP32": np.float32, "INT64": np.int64}[datatype]
    tensor.set_data_from_numpy(np.ones(shape, dtype=dtype), binary_data=binary)
    return tensor


def good_inputs(batch: int = 1) -> list[httpclient.InferInput]:
    return [int_input("INPUT0", [batch, 16]), int_input("INPUT1", [batch, 16])]


def echo_inputs(x_shape: list[int] | None = None) -> list[httpclient.InferInput]:
    shape = [4] if x_shape is None else x_shape
    x = httpclient.InferInput("INPUT", shape, "FP32")
    x.set_data_from_numpy(np.zeros(shape, dtype=np.float32))
    text = httpclient.InferInput("TEXT", [2], "BYTES")
    text.set_data_from_numpy(np.array([b"a", b""], dtype=np.object_))
    return [x, text]


def expect_error(call: Callable[[], Any], status: int, message: str | re.Pattern) -> str:
    """`call` fails with HTTP status `status` and exactly `message` (or a full match of the pattern)."""
    with pytest.raises(InferenceServerException) as info:
        call()
    got_status, got_message = info.value.status(), info.value.message()
    assert got_status == str(status), got_message
    if isinstance(message, re.Pattern):
        assert message.fullmatch(got_message), got_message
    else:
        assert got_message == message
    return got_message


def request(url: str, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None):
    """(status, lower-cased headers, body) of one raw request on a fresh connection."""
    conn = http.client.HTTPConnection(url, timeout=TIMEOUT_S)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def error_of(status: int, headers: dict[str, str], body: bytes) -> tuple[int, str]:
    """(status, message) of an error answer, checking that it is `{"error": msg}` JSON."""
    assert headers.get("content-type") == "application/json", (status, headers, body)
    decoded = json.loads(body)
    assert isinstance(decoded, dict) and list(decoded) == ["error"], decoded
    return status, decoded["error"]


def infer_raw(url: str, model: str, header: Any, binary: bytes | None = None,
              extra_headers: dict[str, str] | None = None) -> tuple[int, str]:
    """POST an infer request whose JSON part is `header` (bytes are sent as is); returns (status, error)."""
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    headers = {"Content-Type": "application/json"}
    if binary is not None:
        headers["Inference-Header-Content-Length"] = str(len(head))
    headers.update(extra_headers or {})
    status, out_headers, body = request(url, "POST", f"/v2/models/{model}/infer", head + (binary or b""), headers)
    assert status != 200, body
    return error_of(status, out_headers, body)


def add_sub_input(name: str = "INPUT0", shape: list[int] | None = None, datatype: str = "INT32",
                  nbytes: int | None = None) -> dict:
    shape = [1, 16] if shape is None else shape
    return {"name": name, "shape": shape, "datatype": datatype, "parameters": {"binary_data_size": 64 if nbytes is None
                                                                              else nbytes}}


ONES = np.ones(16, dtype=np.int32).tobytes()


# ---- model and version lookup --------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/v2/models/nope/ready", "/v2/models/add_sub/versions/99/ready"])
def test_unknown_model_is_not_ready(add_sub, path):
    """Triton 2.51 answers an unknown model's (or version's) readiness as not ready, not as unknown (404)."""
    assert error_of(*request(add_sub.http_url, "GET", path)) == (400, "Model version not ready")
    assert request(add_sub.http_url, "GET", "/v2/models/add_sub/ready")[0] == 200


def test_non_numeric_version_is_not_a_route(add_sub):
    assert error_of(*request(add_sub.http_url, "POST", "/v2/models/add_sub/versions/abc/infer", b"{}")) == (
        404, "Not Found")


# ---- core validation ------------------------------------------------------------------------------------------------

def test_unknown_datatype(add_sub):
    header = {"inputs": [add_sub_input(datatype="INT33"), add_sub_input("INPUT1")]}
    assert infer_raw(add_sub.http_url, "add_sub", header, ONES * 2) == (
        400, f"{P}inference input 'INPUT0' data-type is '<invalid>', but model 'add_sub' expects 'INT32'")


def test_byte_size_mismatch(add_sub):
    header = {"inputs": [add_sub_input(nbytes=60), add_sub_input("INPUT1")]}
    assert infer_raw(add_sub.http_url, "add_sub", header, ONES[:60] + ONES) == (
        400, f"{P}input byte size mismatch for input 'INPUT0' for model 'add_sub'. Expected 64, got 60")


def test_byte_size_mismatch_with_request_id(client):
    inputs = [int_input("INPUT0", [1, 16]), int_input("INPUT1", [1, 16])]
    inputs[0]._raw_data = inputs[0]._raw_data + b"\x00" * 4  # tritonclient then declares 68 bytes
    inputs[0]._parameters["binary_data_size"] = 68
    expect_error(lambda: client.infer("add_sub", inputs, request_id="my-id"), 400,
                 "[request id: my-id] input byte size mismatch for input 'INPUT0' for model 'add_sub'. "
                 "Expected 64, got 68")


def _bytes_body(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(b)) + b for b in items)


def _echo_header(text_bytes: int) -> dict:
    return {"inputs": [
        {"name": "INPUT", "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": 16}},
        {"name": "TEXT", "shape": [2], "datatype": "BYTES", "parameters": {"binary_data_size": text_bytes}},
    ]}


@pytest.mark.parametrize(
    "items, message",
    [
        ([b"a", b"b", b"c"], "unexpected number of string elements 3 for inference input 'TEXT' for model "
                             "'echo_parameters', expecting 2"),
        ([b"a"], "expected 2 string elements for inference input 'TEXT' for model 'echo_parameters', got 1"),
        ([], "expected 2 string elements for inference input 'TEXT' for model 'echo_parameters', got 0"),
    ],
)
def test_bytes_element_count_binary(echo, items, message):
    text = _bytes_body(items)
    assert infer_raw(echo.http_url, "echo_parameters", _echo_header(len(text)), b"\x00" * 16 + text) == (
        400, P + message)


def test_bytes_incomplete_length_indicator(echo):
    text = _bytes_body([b"a"]) + b"\x01\x00"
    assert infer_raw(echo.http_url, "echo_parameters", _echo_header(len(text)), b"\x00" * 16 + text) == (
        400, f"{P}incomplete string length indicator for inference input 'TEXT' for model 'echo_parameters', "
        "expecting 4 bytes but only 2 bytes available. Please make sure the string length indicator is in one buffer.")


def test_bytes_element_longer_than_the_buffer(echo):
    text = _bytes_body([b"a"]) + (100).to_bytes(4, "little") + b"xyz"
    assert infer_raw(echo.http_url, "echo_parameters", _echo_header(len(text)), b"\x00" * 16 + text) == (
        400, "incomplete string data for inference input 'TEXT', expecting string of length 100 but only 3 bytes "
        "available")


@pytest.mark.parametrize(
    "data, message",
    [
        (["a", "b", "c"], "unexpected number of string elements 3 for inference input 'TEXT' for model "
                          "'echo_parameters', expecting 2"),
        (["a"], "expected 2 string elements for inference input 'TEXT' for model 'echo_parameters', got 1"),
    ],
)
def test_bytes_element_count_json(echo, data, message):
    """JSON BYTES are sized from the data itself; the count is then the core's BYTES check (like Triton)."""
    header = {"inputs": [{"name": "INPUT", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
                         {"name": "TEXT", "shape": [2], "datatype": "BYTES", "data": data}]}
    assert infer_raw(echo.http_url, "echo_parameters", header) == (400, P + message)


@pytest.mark.parametrize("data", [[1, 2, 3, 4, 5], [1, 2, 3], [[1, 2], [3]], [1, 2, 3, 4, "x"]])
def test_json_element_count(echo, data):
    """More elements than the shape holds, or fewer (nested arrays read in order, ragged or not; an element past the
    count is a count error whatever its type): tritonserver 2.51's INTERNAL (500) and words."""
    header = {"inputs": [{"name": "INPUT", "shape": [4], "datatype": "FP32", "data": data},
                         {"name": "TEXT", "shape": [2], "datatype": "BYTES", "data": ["a", "b"]}]}
    assert infer_raw(echo.http_url, "echo_parameters", header) == (
        500, "Unable to parse 'data': Shape does not match true shape of 'data' field")


_NON_INTEGER = "attempt to access JSON non-signed-integer as signed-integer"
_NON_UNSIGNED = "attempt to access JSON non-unsigned-integer as unsigned-integer"
_GOOD = {"BOOL": [True, False], "INT8": [-128, 127], "UINT8": [0, 255], "INT32": [-2**31, 2**31 - 1],
         "INT64": [-2**63, 2**63 - 1], "UINT64": [0, 2**64 - 1], "FP32": [1, 2.5], "FP64": [1e308, -3]}


def _identity_header(datatype: str | None = None, data: Any = None) -> dict:
    inputs = [{"name": f"IN_{t}", "shape": [2], "datatype": t, "data": _GOOD[t]} for t in IDENTITY_TYPES]
    for entry in inputs:
        if entry["datatype"] == datatype:
            entry["data"] = data
            entry["shape"] = [len(data) if isinstance(data, list) else 1]
    return {"inputs": inputs}


@pytest.mark.parametrize(
    "datatype, data, reason",
    [
        ("INT32", [1.9], _NON_INTEGER),  # never truncated to 1
        ("INT32", [1.0], _NON_INTEGER),
        ("INT8", [True], _NON_INTEGER),
        ("INT64", ["1"], _NON_INTEGER),
        ("INT64", [None], _NON_INTEGER),
        ("UINT8", [-1], _NON_UNSIGNED),
        ("UINT64", [2.0], _NON_UNSIGNED),
        ("UINT64", [2**64], _NON_UNSIGNED),  # (a JSON number past 2**64 - 1 is read as a float)
        ("BOOL", [1], "attempt to access JSON non-boolean as boolean"),
        ("BOOL", ["false"], "attempt to access JSON non-boolean as boolean"),  # never true
        ("FP64", [True], "attempt to access JSON non-number as double"),
        ("FP32", [{}], "attempt to access JSON non-number as double"),
        ("FP32", 5, "attempt to access JSON non-array as array"),
        # Triton wraps these around (300 as INT8 is 44): refused here
        ("INT8", [300], "300 is out of the range of INT8 [-128, 127]"),
        ("INT32", [-2**31 - 1], "-2147483649 is out of the range of INT32 [-2147483648, 2147483647]"),
        ("UINT8", [256], "256 is out of the range of UINT8 [0, 255]"),
        ("INT64", [2**63], f"{2**63} is out of the range of INT64 [{-2**63}, {2**63 - 1}]"),
    ],
)
def test_json_elements_of_the_wrong_kind_are_refused_not_converted(servers, datatype, data, reason):
    """A JSON element that is not of the input's kind gets tritonserver 2.51's reason (Triton answers these with 500;
    a client's error is 400 here), and an integer outside its datatype's range is refused, not wrapped around."""
    assert infer_raw(servers["identity"].http_url, "identity", _identity_header(datatype, data)) == (
        400, f"Unable to parse 'data' of input 'IN_{datatype}': {reason}")


def test_json_elements_at_the_edges_of_their_range_come_back_unchanged(servers):
    client = httpclient.InferenceServerClient(servers["identity"].http_url, network_timeout=TIMEOUT_S)
    try:
        inputs = []
        for datatype in IDENTITY_TYPES:
            tensor = httpclient.InferInput(f"IN_{datatype}", [2], datatype)
            tensor.set_data_from_numpy(np.array(_GOOD[datatype], dtype=triton_to_np_dtype(datatype)),
                                       binary_data=False)
            inputs.append(tensor)
        outputs = [httpclient.InferRequestedOutput(f"OUT_{t}", binary_data=False) for t in IDENTITY_TYPES]
        result = client.infer("identity", inputs, outputs=outputs)
        for datatype in IDENTITY_TYPES:
            expected = np.array(_GOOD[datatype], dtype=triton_to_np_dtype(datatype))
            assert result.as_numpy(f"OUT_{datatype}").tolist() == expected.tolist(), datatype
    finally:
        client.close()


# ---- parameters ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["triton_foo", "triton_enable_empty_final_response"])
def test_reserved_triton_parameter(echo, key):
    header = {"parameters": {key: True}, "inputs": [
        {"name": "INPUT", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "TEXT", "shape": [2], "datatype": "BYTES", "data": ["a", "b"]}]}
    assert infer_raw(echo.http_url, "echo_parameters", header) == (
        400, "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.")


def test_parameter_of_invalid_type(echo):
    header = {"parameters": {"k": [1, 2]}, "inputs": [
        {"name": "INPUT", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "TEXT", "shape": [2], "datatype": "BYTES", "data": ["a", "b"]}]}
    assert infer_raw(echo.http_url, "echo_parameters", header) == (
        400, "parameter 'k' has invalid type. It should be either 'int', 'bool', or 'string'.")


# ---- malformed bodies: all 400 with a JSON error, and the server keeps serving ------------------------------------

GOOD_HEADER = {"inputs": [add_sub_input(), add_sub_input("INPUT1")]}

MALFORMED = {
    "bad_json": (b'{"inputs": [', None, re.compile(r"failed to parse the request JSON buffer.*")),
    "not_utf8_json": (b'{"inputs": "\xff"}', None, re.compile(r"failed to parse the request JSON buffer.*")),
    "empty_body": (b"", None, re.compile(r"failed to parse the request JSON buffer.*")),
    "json_array": (b"[1, 2]", None, re.compile(r".+")),
    "json_string": (b'"inputs"', None, re.compile(r".+")),
    "json_null": (b"null", None, re.compile(r".+")),
    "inputs_not_array": (json.dumps({"inputs": {"name": "INPUT0"}}).encode(), None, re.compile(r".+")),
    "input_not_object": (json.dumps({"inputs": [1]}).encode(), None, re.compile(r".+")),
    "input_without_name": (json.dumps({"inputs": [{"shape": [1, 16], "datatype": "INT32", "data": [0] * 16}]}).encode(),
                           None, re.compile(r".+")),
    "shape_not_array": (json.dumps({"inputs": [{**add_sub_input(), "shape": "1,16"}]}).encode(), ONES,
                        re.compile(r".*'shape'.*")),
    "negative_dim": (json.dumps({"inputs": [add_sub_input(shape=[1, -16]), add_sub_input("INPUT1")]}).encode(),
                     ONES * 2, re.compile(r".*'shape'.*")),
    "overflowing_dim": (json.dumps({"inputs": [add_sub_input(shape=[1, 2**64]), add_sub_input("INPUT1")]}).encode(),
                        ONES * 2, re.compile(r".*(shape|exceeds).*")),
    "huge_dims_product": (json.dumps({"inputs": [add_sub_input(shape=[2**40, 2**40]),
                                                 add_sub_input("INPUT1")]}).encode(),
                          ONES * 2, re.compile(r".+")),
    "float_dim": (json.dumps({"inputs": [add_sub_input(shape=[1, 16.0]), add_sub_input("INPUT1")]}).encode(),
                  ONES * 2, re.compile(r".*'shape'.*")),
    "binary_too_short": (json.dumps(GOOD_HEADER).encode(), ONES + ONES[:60],
                         "unexpected size for input 'INPUT1', expecting 4 additional bytes for model 'add_sub'"),
    "binary_leftover": (json.dumps(GOOD_HEADER).encode(), ONES * 2 + b"\x00",
                        "unexpected additional input data for model 'add_sub'"),
    "negative_binary_data_size": (json.dumps({"inputs": [add_sub_input(nbytes=-64), add_sub_input("INPUT1")]}).encode(),
                                  ONES * 2, re.compile(r".*binary_data_size.*")),
    "data_and_binary": (
        json.dumps({"inputs": [{**add_sub_input(), "data": [0] * 16}, add_sub_input("INPUT1")]}).encode(), ONES * 2,
        "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
        "'shared_memory_region' in 'parameters'. But set 'data' 'binary_data_size'"),
    "no_data": (
        json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32"}]}).encode(), None,
        "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
        "'shared_memory_region' in 'parameters'. But no field is set"),
    "json_data_wrong_type": (
        json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": ["x"] * 16},
                               add_sub_input("INPUT1")]}).encode(), ONES, re.compile(r".+")),
    "outputs_not_array": (json.dumps({**GOOD_HEADER, "outputs": {"name": "OUTPUT0"}}).encode(), ONES * 2,
                          re.compile(r".+")),
    "parameters_not_object": (json.dumps({**GOOD_HEADER, "parameters": [1]}).encode(), ONES * 2, re.compile(r".+")),
    "id_not_string": (json.dumps({**GOOD_HEADER, "id": 5}).encode(), ONES * 2, re.compile(r".*'id'.*")),
    "binary_data_output_not_bool": (json.dumps({**GOOD_HEADER, "parameters": {"binary_data_output": "yes"}}).encode(),
                                    ONES * 2, re.compile(r".*binary_data_output.*")),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_body(add_sub, case):
    body, binary, message = MALFORMED[case]
    status, error = infer_raw(add_sub.http_url, "add_sub", body, binary)
    assert status == 400, error
    if isinstance(message, re.Pattern):
        assert message.fullmatch(error), error
    else:
        assert error == message
    check_add_sub_serves(add_sub.http_url)


@pytest.mark.parametrize(
    "value, message",
    [
        ("500", "inference header size should be in range (0, {size}), got: 500"),
        ("-1", "inference header size should be in range (0, {size}), got: -1"),
        ("abc", "Unable to parse Inference-Header-Content-Length, got: abc"),
        ("99999999999", "Unable to parse Inference-Header-Content-Length, value is out of range "
                        "[ -2147483648, 2147483647 ], got: 99999999999"),
    ],
)
def test_bad_inference_header_content_length(add_sub, value, message):
    body = json.dumps(GOOD_HEADER).encode() + ONES * 2
    status, headers, data = request(add_sub.http_url, "POST", "/v2/models/add_sub/infer", body,
                                    {"Inference-Header-Content-Length": value})
    assert error_of(status, headers, data) == (400, message.format(size=len(body)))
    check_add_sub_serves(add_sub.http_url)


def test_header_length_cutting_json(add_sub):
    body = json.dumps(GOOD_HEADER).encode() + ONES * 2
    status, headers, data = request(add_sub.http_url, "POST", "/v2/models/add_sub/infer", body,
                                    {"Inference-Header-Content-Length": "10"})
    status, error = error_of(status, headers, data)
    assert status == 400 and error.startswith("failed to parse the request JSON buffer"), error


# ---- routes and methods -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/v2/models/add_sub/infer"),
        ("PUT", "/v2/models/add_sub/infer"),
        ("POST", "/v2/health/live"),
        ("POST", "/v2/health/ready"),
        ("DELETE", "/v2"),
        ("POST", "/v2/models/add_sub"),
        ("POST", "/v2/models/add_sub/config"),
        ("POST", "/v2/models/add_sub/stats"),
        ("POST", "/v2/models/stats"),
        ("GET", "/v2/repository/index"),
        ("PUT", "/v2/logging"),
        ("DELETE", "/v2/trace/setting"),
    ],
)
def test_wrong_method(add_sub, method, path):
    assert error_of(*request(add_sub.http_url, method, path)) == (405, "Method Not Allowed")


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/"),
        ("GET", "/v1/models"),
        ("GET", "/v2/unknown"),
        ("POST", "/v2/models/add_sub/predict"),
        ("GET", "/v2/models/add_sub/versions/1/nope"),
        ("GET", "/v2/health"),
        ("GET", "/v2/health/alive"),
        ("GET", "/metrics"),
    ],
)
def test_unknown_path(add_sub, method, path):
    assert error_of(*request(add_sub.http_url, method, path)) == (404, "Not Found")


def test_trailing_slash_and_query_string(add_sub):
    assert request(add_sub.http_url, "GET", "/v2/health/ready?verbose=1")[0] == 200
    status, _, body = request(add_sub.http_url, "GET", "/v2/models/add_sub?x=y")
    assert status == 200 and json.loads(body)["name"] == "add_sub"


# ---- transport: chunked bodies, pipelining, body size limit --------------------------------------------------------

def _socket(url: str) -> socket.socket:
    host, port = url.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=TIMEOUT_S)


def _infer_request_bytes(a: np.ndarray, b: np.ndarray, request_id: str, extra: str = "") -> bytes:
    header = json.dumps({"id": request_id, "inputs": [
        {"name": "INPUT0", "shape": list(a.shape), "datatype": "INT32", "parameters": {"binary_data_size": a.nbytes}},
        {"name": "INPUT1", "shape": list(b.shape), "datatype": "INT32", "parameters": {"binary_data_size": b.nbytes}},
    ], "parameters": {"binary_data_output": True}}).encode()
    body = header + a.tobytes() + b.tobytes()
    return (f"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
            f"Inference-Header-Content-Length: {len(header)}\r\n{extra}\r\n").encode() + body


def _check_add_sub_response(status, headers, body, a, b, request_id):
    assert status == 200, body
    result = httpclient.InferResult.from_response_body(body, header_length=int(
        headers["inference-header-content-length"]))
    assert result.get_response()["id"] == request_id
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def test_chunked_request_body(add_sub):
    a = np.arange(48, dtype=np.int32).reshape(3, 16)
    b = np.full((3, 16), 7, dtype=np.int32)
    header = json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [3, 16], "datatype": "INT32", "parameters": {"binary_data_size": a.nbytes}},
        {"name": "INPUT1", "shape": [3, 16], "datatype": "INT32", "parameters": {"binary_data_size": b.nbytes}},
    ], "id": "chunked"}).encode()
    body = header + a.tobytes() + b.tobytes()
    chunked = b""
    for start in range(0, len(body), 37):  # chunk boundaries fall inside the JSON and the tensors
        piece = body[start : start + 37]
        chunked += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    chunked += b"0\r\n\r\n"
    with _socket(add_sub.http_url) as sock:
        sock.sendall(
            (f"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
             f"Inference-Header-Content-Length: {len(header)}\r\n\r\n").encode()
        )
        for start in range(0, len(chunked), 100):  # and arrive in several TCP writes
            sock.sendall(chunked[start : start + 100])
        buffer = bytearray()
        status, _headers, data = _read_response(sock, buffer)
        # A JSON response (no binary outputs requested): decode it directly.
        assert status == 200, data
        result = httpclient.InferResult.from_response_body(data)
        assert result.get_response()["id"] == "chunked"
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


def test_chunked_raw_binary_request(add_sub):
    """Triton's qa test_content_encoding_chunked_manually, on a JSON body: the decoded body is what counts."""
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
                                  {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}).encode()
    chunked = f"{len(body):X}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    status, _headers, data = request(add_sub.http_url, "POST", "/v2/models/add_sub/infer", chunked,
                                    {"Transfer-Encoding": "chunked"})
    assert status == 200, data
    assert json.loads(data)["outputs"][0]["data"] == [i + 1 for i in range(16)]


def test_pipelined_requests_answered_in_order(add_sub):
    """Many requests written at once on one keep-alive socket come back in request order."""
    cases = []
    wire = b""
    for i in range(12):
        batch = 1 + i % 4
        a = np.full((batch, 16), i, dtype=np.int32)
        b = np.arange(batch * 16, dtype=np.int32).reshape(batch, 16)
        cases.append((a, b, f"req-{i}"))
        wire += _infer_request_bytes(a, b, f"req-{i}")
        if i == 5:  # a bad request in the middle does not break the sequence
            wire += b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{bad}"
            cases.append(None)
        if i == 8:
            wire += b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n"
            cases.append("ready")
    with _socket(add_sub.http_url) as sock:
        sock.sendall(wire)
        buffer = bytearray()
        for case in cases:
            status, headers, body = _read_response(sock, buffer)
            if case is None:
                assert status == 400 and "error" in json.loads(body)
            elif case == "ready":
                assert status == 200 and body == b""
            else:
                _check_add_sub_response(status, headers, body, *case)
            assert headers.get("connection") != "close"
        # The connection is still usable afterwards.
        a, b = np.ones((1, 16), dtype=np.int32), np.ones((1, 16), dtype=np.int32)
        sock.sendall(_infer_request_bytes(a, b, "after"))
        _check_add_sub_response(*_read_response(sock, buffer), a, b, "after")


def _large_infer_request_bytes(a: np.ndarray, b: np.ndarray, request_id: str, size: int = 80_000,
                               extra: str = "") -> bytes:
    """An add_sub request whose body is `size` bytes (JSON header padded with whitespace): large enough to be
    received straight into its own buffer."""
    header = json.dumps({"id": request_id, "inputs": [
        {"name": "INPUT0", "shape": list(a.shape), "datatype": "INT32", "parameters": {"binary_data_size": a.nbytes}},
        {"name": "INPUT1", "shape": list(b.shape), "datatype": "INT32", "parameters": {"binary_data_size": b.nbytes}},
    ], "parameters": {"binary_data_output": True}}).encode()
    header = header[:-1] + b" " * (size - len(header) - a.nbytes - b.nbytes) + b"}"
    body = header + a.tobytes() + b.tobytes()
    assert len(body) == size
    return (f"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
            f"Inference-Header-Content-Length: {len(header)}\r\n{extra}\r\n").encode() + body


@pytest.mark.parametrize("sizes", ["varied", "same"])
@pytest.mark.parametrize("split", ["one_write", "head_then_pieces", "head_with_some_body", "odd_pieces"])
def test_large_bodies_pipelined_with_small_ones(add_sub, split, sizes):
    """Large Content-Length bodies (read straight into their buffers) and small requests on one keep-alive
    connection, however the bytes are cut into TCP writes: every answer is right and in order (a body buffer
    is reused only when no queued request still holds it)."""
    cases, pieces = [], []
    for i in range(6):
        a = np.full((2, 16), i, dtype=np.int32)
        b = np.arange(32, dtype=np.int32).reshape(2, 16)
        large = i % 2 == 0
        wire = (_large_infer_request_bytes(a, b, f"req-{i}", size=70_000 + (977 * i if sizes == "varied" else 0)) if large
                else _infer_request_bytes(a, b, f"req-{i}"))
        cases.append((a, b, f"req-{i}"))
        head, _, body = wire.partition(b"\r\n\r\n")
        head += b"\r\n\r\n"
        if split == "head_then_pieces":
            pieces += [head] + [body[k : k + 1000] for k in range(0, len(body), 1000)]
        elif split == "head_with_some_body":
            pieces += [head + body[:5000], body[5000:]]
        else:
            pieces.append(wire)
    if split == "one_write":
        pieces = [b"".join(pieces)]
    elif split == "odd_pieces":
        wire = b"".join(pieces)
        pieces = [wire[k : k + 7919] for k in range(0, len(wire), 7919)]
    with _socket(add_sub.http_url) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for piece in pieces:
            sock.sendall(piece)
        buffer = bytearray()
        for case in cases:
            status, headers, body = _read_response(sock, buffer)
            _check_add_sub_response(status, headers, body, *case)
            assert headers.get("connection") != "close"


def test_large_bodies_one_after_another_reuse_nothing_stale(add_sub):
    """Same-sized large requests answered one by one (the body buffer is reused): each answer is its own."""
    with _socket(add_sub.http_url) as sock:
        buffer = bytearray()
        for i in range(5):
            a = np.full((1, 16), i, dtype=np.int32)
            b = np.arange(16, dtype=np.int32).reshape(1, 16) * i
            sock.sendall(_large_infer_request_bytes(a, b, f"seq-{i}"))
            _check_add_sub_response(*_read_response(sock, buffer), a, b, f"seq-{i}")


def test_large_body_with_connection_close(add_sub):
    a, b = np.ones((1, 16), dtype=np.int32), np.ones((1, 16), dtype=np.int32)
    with _socket(add_sub.http_url) as sock:
        sock.sendall(_large_infer_request_bytes(a, b, "last", extra="Connection: close\r\n"))
        buffer = bytearray()
        _check_add_sub_response(*_read_response(sock, buffer), a, b, "last")
        assert sock.recv(10) == b""  # the server closed the connection


def test_large_body_cut_short_by_the_client(add_sub):
    """A client that goes away in the middle of a large body leaves the server serving others."""
    a, b = np.ones((1, 16), dtype=np.int32), np.ones((1, 16), dtype=np.int32)
    wire = _large_infer_request_bytes(a, b, "cut")
    with _socket(add_sub.http_url) as sock:
        sock.sendall(wire[: len(wire) // 2])
    check_add_sub_serves(add_sub.http_url)


def test_connection_close_is_honoured(add_sub):
    a, b = np.ones((1, 16), dtype=np.int32), np.ones((1, 16), dtype=np.int32)
    with _socket(add_sub.http_url) as sock:
        sock.sendall(_infer_request_bytes(a, b, "last", extra="Connection: close\r\n"))
        buffer = bytearray()
        status, headers, body = _read_response(sock, buffer)
        _check_add_sub_response(status, headers, body, a, b, "last")
        assert headers.get("connection") == "close"
        assert sock.recv(10) == b""  # the server closed the connection


def test_garbage_request_line(add_sub):
    with _socket(add_sub.http_url) as sock:
        sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        buffer = bytearray()
        status, headers, body = _read_response(sock, buffer)
        assert status == 400
        assert headers["content-type"] == "application/json" and json.loads(body)["error"]
    check_add_sub_serves(add_sub.http_url)


@pytest.mark.parametrize("size", [MAX_INPUT + 1, MAX_INPUT + 2_000_000])
def test_body_larger_than_max_input_size(add_sub, size):
    """`--http-max-input-size` bounds the request body; the answer says which limit and how to raise it."""
    status, headers, body = request(add_sub.http_url, "POST", "/v2/models/add_sub/infer", b" " * size)
    status, message = error_of(status, headers, body)
    assert status in (400, 413)
    assert re.fullmatch(rf"request (JSON )?size of {size} bytes exceeds the maximum allowed input size of "
                        rf"{MAX_INPUT} bytes\. Use --http-max-input-size to increase the limit\.", message), message
    check_add_sub_serves(add_sub.http_url)


def test_compressed_body_larger_than_max_input_size(add_sub):
    status, headers, body = request(add_sub.http_url, "POST", "/v2/models/add_sub/infer",
                                    gzip.compress(b" " * (MAX_INPUT * 3)), {"Content-Encoding": "gzip"})
    status, message = error_of(status, headers, body)
    assert status in (400, 413)
    assert f"maximum allowed input size of {MAX_INPUT} bytes" in message
    assert "--http-max-input-size" in message


def test_body_at_max_input_size_accepted(add_sub):
    header = json.dumps(GOOD_HEADER).encode()
    padding = MAX_INPUT - len(header) - 2 * len(ONES)
    padded = header[:-1] + b" " * padding + b"}" + ONES * 2  # JSON whitespace up to exactly the limit
    assert len(padded) == MAX_INPUT
    status, _headers, data = request(add_sub.http_url, "POST", "/v2/models/add_sub/infer", padded,
                                    {"Inference-Header-Content-Length": str(len(padded) - 2 * len(ONES))})
    assert status == 200, data


def test_server_still_serves_after_everything(add_sub, echo):
    check_add_sub_serves(add_sub.http_url)
    with httpclient.InferenceServerClient(echo.http_url) as c:
        assert c.infer("echo_parameters", echo_inputs(), parameters={"z": "1"}).as_numpy("PARAMS").tolist() == [
            b"z='1'"]


def test_chunked_body_larger_than_max_input_size(add_sub):
    piece = b" " * 50_000
    chunked = b"".join(f"{len(piece):x}\r\n".encode() + piece + b"\r\n" for _ in range(3)) + b"0\r\n\r\n"
    with _socket(add_sub.http_url) as sock:
        sock.sendall(b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
        status, headers, body = _read_response(sock, bytearray())
    assert error_of(status, headers, body) == (413, (
        f"request size of more than {MAX_INPUT} bytes exceeds the maximum allowed input size of {MAX_INPUT} bytes. "
        "Use --http-max-input-size to increase the limit."))
    check_add_sub_serves(add_sub.http_url)


@pytest.mark.parametrize("large", [False, True])
def test_expect_100_continue(add_sub, large):
    """A client that sends `Expect: 100-continue` (curl does for large bodies) is told to go on at once; a
    large body then arriving in pieces is received straight into its buffer."""
    a, b = np.arange(16, dtype=np.int32).reshape(1, 16), np.ones((1, 16), dtype=np.int32)
    build = _large_infer_request_bytes if large else _infer_request_bytes
    wire = build(a, b, "expect", extra="Expect: 100-continue\r\n")
    head, _, body = wire.partition(b"\r\n\r\n")
    with _socket(add_sub.http_url) as sock:
        sock.sendall(head + b"\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(1024) == b"HTTP/1.1 100 Continue\r\n\r\n"
        for piece in range(0, len(body), 20_000):
            sock.sendall(body[piece : piece + 20_000])
        _check_add_sub_response(*_read_response(sock, bytearray()), a, b, "expect")


def test_head_response_has_no_body(add_sub):
    """HEAD is not a Triton method (405), and its answer carries no body, so the connection stays in step."""
    a, b = np.ones((1, 16), dtype=np.int32), np.ones((1, 16), dtype=np.int32)
    with _socket(add_sub.http_url) as sock:
        sock.sendall(b"HEAD /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n" + _infer_request_bytes(a, b, "next"))
        buffer = bytearray()
        while b"\r\n\r\n" not in buffer:
            buffer += sock.recv(65536)
        head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 405 ")
        buffer[:] = rest
        _check_add_sub_response(*_read_response(sock, buffer), a, b, "next")


def test_statistics_unknown_model_or_version(client):
    expect_error(lambda: client.get_inference_statistics("nope"), 400, "requested model 'nope' is not available")
    expect_error(lambda: client.get_inference_statistics("add_sub", "99"), 400,
                 "requested model version is not available for model 'add_sub'")
    (entry,) = client.get_inference_statistics("add_sub", "1")["model_stats"]
    assert (entry["name"], entry["version"]) == ("add_sub", "1")


def test_large_response_to_a_slow_reader_keeps_its_bytes():
    """A client that reads slowly leaves most of a large answer in the server's transport buffer, and Python 3.12
    keeps a view of the worker's output segment there, not a copy: the segment must not go back to the worker (and
    be filled with the next request's answer) before those bytes are sent."""
    identity = ("--max-batch-size", "0", *tensor_args("input", [("IN_FP32", "fp32", "-1")]),
                *tensor_args("output", [("OUT_FP32", "fp32", "-1")]))
    # 15 MB: more than the kernel buffers between the two sockets take, and less than the 16 MiB above which a
    # tensor gets a segment of its own (never reused): this one comes from the worker's shared arena.
    size = 3_800_000

    def tensor(value: float) -> tuple[np.ndarray, httpclient.InferInput]:
        array = np.full(size, value, dtype=np.float32)
        item = httpclient.InferInput("IN_FP32", [size], "FP32")
        item.set_data_from_numpy(array, binary_data=True)
        return array, item

    with serve("tests.models:identity", *identity) as server:
        host, port = server.http_url.rsplit(":", 1)
        first, item = tensor(1.0)
        body, json_size = httpclient.InferenceServerClient.generate_request_body(
            [item], outputs=[httpclient.InferRequestedOutput("OUT_FP32", binary_data=True)]
        )
        slow = http.client.HTTPConnection(host, int(port), timeout=60)
        slow.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        slow.sock.settimeout(60)
        slow.sock.connect((host, int(port)))
        try:
            slow.request("POST", "/v2/models/identity/infer", body,
                         {"Inference-Header-Content-Length": str(json_size), "Content-Type": "application/octet-stream"})
            with httpclient.InferenceServerClient(server.http_url, network_timeout=60) as client:
                for value in (2.0, 3.0, 4.0):  # meanwhile the worker answers others, reusing freed segments
                    other, other_item = tensor(value)
                    np.testing.assert_array_equal(client.infer("identity", [other_item]).as_numpy("OUT_FP32"), other)
            response = slow.getresponse()
            data = response.read()
            result = httpclient.InferenceServerClient.parse_response_body(
                data, header_length=int(response.getheader("Inference-Header-Content-Length"))
            )
            np.testing.assert_array_equal(result.as_numpy("OUT_FP32"), first)
        finally:
            slow.close()


def test_concurrent_large_responses_keep_their_bytes():
    """Many large responses at once, each on its own connection: what a socket does not take at once waits in the
    transport's buffer (Python 3.12 keeps a view of the worker's output segment there, not a copy), so the segment
    must not go back to the worker before it is sent. Distinct contents per request show any mix-up."""
    with serve("tests.models:identity", "--max-batch-size", "0",
               *tensor_args("input", [("IN_FP32", "fp32", "-1")]),
               *tensor_args("output", [("OUT_FP32", "fp32", "-1")])) as server:
        arrays = [np.full(750_000 + 1000 * i, i, dtype=np.float32) for i in range(12)]
        with httpclient.InferenceServerClient(server.http_url, concurrency=12, network_timeout=60) as client:
            for _ in range(2):
                pending = []
                for array in arrays:
                    tensor = httpclient.InferInput("IN_FP32", list(array.shape), "FP32")
                    tensor.set_data_from_numpy(array, binary_data=True)
                    pending.append(client.async_infer("identity", [tensor]))
                for array, request in zip(arrays, pending):
                    np.testing.assert_array_equal(request.get_result().as_numpy("OUT_FP32"), array)
