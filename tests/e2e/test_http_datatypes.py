"""Over HTTP only: JSON both ways for every datatype JSON can carry (FP16/BF16 give Triton's errors), mixed
per-output encodings, the request-level binary default, and raw binary requests (`Inference-Header-Content-Length:
0`). The binary round trips both protocols share: tests/e2e/test_datatypes.py.
"""

from __future__ import annotations

import http.client
import json

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._support.datatypes import (
    MODEL, NUMPY, TIMEOUT_S, all_arrays, assert_same, check_http_result, http_infer, http_inputs, http_outputs,
    make_array, serialized_bytes, server_args,
)
from tests._support.datatypes import HTTP_PATHS as PATHS
from tests._support.serving import lazy_servers
from tests.models import ALL_DATATYPES

JSON_DATATYPES = [dt for dt in ALL_DATATYPES if dt not in ("FP16", "BF16")]
# `binary_data` per datatype for "JSON wherever Triton allows it": FP16/BF16 have no JSON form and stay binary.
JSON_FLAGS = {dt: dt not in JSON_DATATYPES for dt in ALL_DATATYPES}
P = "[request id: <id_unknown>] "

SERVERS = {
    "batching": server_args(8),
    "plain": server_args(0),
    "raw_fp32": server_args(0, datatypes=["FP32"]),  # one input IN_FP32 [-1]
    "raw_batching": server_args(4, "3,-1", ["INT16"]),  # one input IN_INT16 [-1,3,-1]
    "raw_bytes": server_args(2, "1", ["BYTES"]),  # one input IN_BYTES [-1,1]
    "raw_two_variable": server_args(0, "-1,-1", ["UINT8"]),
    "raw_bytes_variable": server_args(0, "-1", ["BYTES"]),
}


@pytest.fixture(scope="module")
def servers():
    """Servers of this module by name, each started the first time a test asks for it."""
    yield from lazy_servers({name: ("tests.models:identity", args) for name, args in SERVERS.items()})


@pytest.fixture(scope="module")
def plain(servers):
    return servers["plain"]


@pytest.fixture(scope="module")
def batching(servers):
    return servers["batching"]


def post(url: str, path: str, body: bytes, headers: dict[str, str] | None = None):
    """(status, headers, body) of one raw POST."""
    conn = http.client.HTTPConnection(url, timeout=TIMEOUT_S)
    try:
        conn.request("POST", path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def post_infer(url: str, request: dict, binary: bytes | None = None, model: str = MODEL):
    """A hand-built infer request (JSON header plus optional binary section); returns (status, InferResult|error)."""
    header = json.dumps(request).encode()
    headers = {"Content-Type": "application/json" if binary is None else "application/octet-stream"}
    if binary is not None:
        headers["Inference-Header-Content-Length"] = str(len(header))
    status, out_headers, body = post(url, f"/v2/models/{model}/infer", header + (binary or b""), headers)
    if status != 200:
        assert out_headers["content-type"] == "application/json"
        return status, json.loads(body)["error"]
    length = out_headers.get("inference-header-content-length")
    if length is None:
        assert out_headers["content-type"] == "application/json"
    else:
        assert out_headers["content-type"] == "application/octet-stream"
    return status, httpclient.InferResult.from_response_body(body, header_length=None if length is None else int(length))


# ---- binary ------------------------------------------------------------------------------------------------------

def test_default_outputs_are_binary(plain):
    """Without requested outputs tritonclient asks for `binary_data_output`; every output comes back."""
    arrays = all_arrays(lambda dt: (4,), seed=8)
    with httpclient.InferenceServerClient(plain.http_url) as c:
        result = c.infer(MODEL, http_inputs(arrays))
    check_http_result(result, arrays, binary=True)


# ---- JSON ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS)
def test_json_both_ways_plain(plain, path):
    arrays = all_arrays(lambda dt: (11,), seed=3, json_safe=True)
    check_http_result(PATHS[path](plain.http_url, arrays, JSON_FLAGS, JSON_FLAGS), arrays, binary=JSON_FLAGS)


@pytest.mark.parametrize("batch", [1, 2])
def test_json_both_ways_batching(batching, batch):
    arrays = all_arrays(lambda dt: (batch, 3), seed=4, json_safe=True)
    result = http_infer(batching.http_url, arrays, JSON_FLAGS, JSON_FLAGS)
    check_http_result(result, arrays, binary=JSON_FLAGS)
    assert result.get_output("OUT_INT32")["data"] == arrays["INT32"].reshape(-1).tolist()  # flat row-major list


def test_json_zero_size(plain):
    arrays = all_arrays(lambda dt: (0,), json_safe=True)
    check_http_result(http_infer(plain.http_url, arrays, JSON_FLAGS, JSON_FLAGS), arrays, binary=JSON_FLAGS)


def test_json_in_binary_out_and_back(plain):
    arrays = all_arrays(lambda dt: (6,), seed=9, json_safe=True)
    check_http_result(http_infer(plain.http_url, arrays, JSON_FLAGS, True), arrays, binary=True)
    check_http_result(http_infer(plain.http_url, arrays, True, JSON_FLAGS), arrays, binary=JSON_FLAGS)


def test_json_nested_data_and_values(plain):
    """`data` may be nested; values keep their exact integer and float values."""
    request = {
        "inputs": [
            {"name": "IN_INT64", "datatype": "INT64", "shape": [4], "data": [[-(2**63), 2**63 - 1], [0, -1]]},
            {"name": "IN_UINT64", "datatype": "UINT64", "shape": [2], "data": [2**64 - 1, 0]},
            {"name": "IN_BOOL", "datatype": "BOOL", "shape": [3], "data": [True, False, True]},
            {"name": "IN_FP64", "datatype": "FP64", "shape": [3], "data": [1e308, -5e-324, 0.1]},
            {"name": "IN_BYTES", "datatype": "BYTES", "shape": [2], "data": ["é", ""]},
        ],
        "outputs": [{"name": f"OUT_{dt}"} for dt in ("INT64", "UINT64", "BOOL", "FP64", "BYTES")],
    }
    given = {i["name"] for i in request["inputs"]}
    for dt in ALL_DATATYPES:  # the model needs every input: the others go empty, as binary
        if f"IN_{dt}" not in given:
            request["inputs"].append({"name": f"IN_{dt}", "datatype": dt, "shape": [0],
                                      "parameters": {"binary_data_size": 0}})
    status, result = post_infer(plain.http_url, request, b"")
    assert status == 200, result
    # Default without binary_data / binary_data_output: JSON.
    assert all("data" in o for o in result.get_response()["outputs"])
    assert result.get_output("OUT_INT64")["data"] == [-(2**63), 2**63 - 1, 0, -1]
    assert result.get_output("OUT_UINT64")["data"] == [2**64 - 1, 0]
    assert result.get_output("OUT_BOOL")["data"] == [True, False, True]
    assert result.get_output("OUT_FP64")["data"] == [1e308, -5e-324, 0.1]
    assert result.get_output("OUT_BYTES")["data"] == ["é", ""]


@pytest.mark.parametrize("datatype", ["FP16", "BF16"])
def test_json_half_input_refused(plain, datatype):
    request = {"inputs": [{"name": f"IN_{datatype}", "datatype": datatype, "shape": [2], "data": [1.0, 2.0]}]}
    status, error = post_infer(plain.http_url, request)
    assert (status, error) == (
        400, f"receiving {datatype} data via JSON is not supported. Please use the binary data format for input "
        f"IN_{datatype}",
    )


def test_json_fp16_input_refused_through_client(plain):
    arrays = all_arrays(lambda dt: (2,), datatypes=["FP16"], json_safe=True)
    with httpclient.InferenceServerClient(plain.http_url) as c, pytest.raises(InferenceServerException) as info:
        c.infer(MODEL, http_inputs(arrays, binary=False), outputs=http_outputs(arrays))
    assert info.value.status() == "400"
    assert info.value.message() == (
        "receiving FP16 data via JSON is not supported. Please use the binary data format for input IN_FP16"
    )


@pytest.mark.parametrize("datatype", ["FP16", "BF16"])
def test_json_half_output_refused(plain, datatype):
    arrays = all_arrays(lambda dt: (3,))
    with httpclient.InferenceServerClient(plain.http_url) as c, pytest.raises(InferenceServerException) as info:
        c.infer(MODEL, http_inputs(arrays), outputs=http_outputs([datatype], binary=False))
    assert info.value.status() == "400"
    assert info.value.message() == (
        f"sending {datatype} data via JSON is not supported. Please use the binary data format for output"
    )
    # The same request with a binary output works.
    check_http_result(http_infer(plain.http_url, arrays), arrays)


def test_json_bytes_output_not_utf8_refused(plain):
    """JSON strings are text: BYTES elements that are not UTF-8 give a clear 400, not a server error."""
    arrays = all_arrays(lambda dt: (3,))
    arrays["BYTES"] = np.array([b"ok", b"\xff\xfe", b""], dtype=np.object_)
    with httpclient.InferenceServerClient(plain.http_url) as c, pytest.raises(InferenceServerException) as info:
        c.infer(MODEL, http_inputs(arrays), outputs=http_outputs(["BYTES"], binary=False))
    assert info.value.status() == "400"
    assert info.value.message() == (
        "output 'OUT_BYTES' holds BYTES elements that are not valid UTF-8 and can not be sent via JSON. "
        "Please use the binary data format for output"
    )
    check_http_result(http_infer(plain.http_url, arrays), arrays)


# ---- mixed encodings -------------------------------------------------------------------------------------------

def test_mixed_per_output_encodings(plain):
    arrays = all_arrays(lambda dt: (5,), seed=12, json_safe=True)
    binary_out = {dt: (i % 2 == 0 or dt in ("FP16", "BF16")) for i, dt in enumerate(ALL_DATATYPES)}
    binary_in = {dt: (i % 3 == 0 or dt in ("FP16", "BF16")) for i, dt in enumerate(ALL_DATATYPES)}
    for path in PATHS.values():
        check_http_result(path(plain.http_url, arrays, binary_in, binary_out), arrays, binary=binary_out)


def _binary_request(arrays: dict[str, np.ndarray], outputs: list[dict], parameters: dict | None = None):
    """All inputs binary; the model's inputs not in `arrays` go empty."""
    inputs, chunks = [], []
    empty = {dt: np.empty(0, dtype=NUMPY[dt]) for dt in ALL_DATATYPES if dt not in arrays}
    for datatype, array in {**arrays, **empty}.items():
        data = array.tobytes() if datatype != "BYTES" else serialized_bytes(array)
        inputs.append({"name": f"IN_{datatype}", "datatype": datatype, "shape": list(array.shape),
                       "parameters": {"binary_data_size": len(data)}})
        chunks.append(data)
    request: dict = {"inputs": inputs, "outputs": outputs}
    if parameters is not None:
        request["parameters"] = parameters
    return request, b"".join(chunks)


@pytest.mark.parametrize("default", [True, False, None])
def test_request_level_binary_default_and_overrides(plain, default):
    """`binary_data_output` sets the default; a per-output `binary_data` overrides it either way."""
    arrays = {dt: make_array(dt, (4,), 13, json_safe=True) for dt in ("INT32", "FP64", "BYTES", "UINT8")}
    outputs = [
        {"name": "OUT_INT32"},  # follows the default
        {"name": "OUT_FP64", "parameters": {"binary_data": True}},
        {"name": "OUT_BYTES", "parameters": {"binary_data": False}},
        {"name": "OUT_UINT8", "parameters": {}},
    ]
    request, binary = _binary_request(arrays, outputs, None if default is None else {"binary_data_output": default})
    status, result = post_infer(plain.http_url, request, binary)
    assert status == 200, result
    expected = {"INT32": bool(default), "FP64": True, "BYTES": False, "UINT8": bool(default)}
    check_http_result(result, arrays, binary=expected)


def test_no_requested_outputs_follow_request_default(plain):
    """Without requested outputs every output is returned, in the request-level encoding."""
    arrays = all_arrays(lambda dt: (3,), seed=14, json_safe=True)
    request, binary = _binary_request(arrays, [], {"binary_data_output": True})
    del request["outputs"]
    status, result = post_infer(plain.http_url, request, binary)
    assert status == 200, result
    check_http_result(result, arrays, binary=True)
    # JSON by default: the FP16 output has no JSON form.
    for parameters in ({"binary_data_output": False}, None):
        request, binary = _binary_request(arrays, [], parameters)
        del request["outputs"]
        assert post_infer(plain.http_url, request, binary) == (
            400, "sending FP16 data via JSON is not supported. Please use the binary data format for output")


# ---- raw binary requests ---------------------------------------------------------------------------------------

RAW = {"Inference-Header-Content-Length": "0", "Content-Type": "application/octet-stream"}


def raw_infer(url: str, body: bytes):
    status, headers, data = post(url, f"/v2/models/{MODEL}/infer", body, RAW)
    if status != 200:
        return status, json.loads(data)["error"]
    assert headers["content-type"] == "application/octet-stream"
    return status, httpclient.InferResult.from_response_body(data, header_length=int(
        headers["inference-header-content-length"]))


def test_raw_binary_single_input(servers):
    array = make_array("FP32", (37,), seed=15)
    status, result = raw_infer(servers["raw_fp32"].http_url, array.tobytes())
    assert status == 200, result
    output = result.get_output("OUT_FP32")
    assert output["shape"] == [37] and output["parameters"] == {"binary_data_size": 37 * 4}  # always binary
    assert_same(result.as_numpy("OUT_FP32"), array, "FP32")


def test_raw_binary_empty_body(servers):
    status, result = raw_infer(servers["raw_fp32"].http_url, b"")
    assert status == 200, result
    assert result.get_output("OUT_FP32")["shape"] == [0]


def test_raw_binary_batching_model(servers):
    """A batching model takes a raw request as batch 1; the one variable dim is deduced from the size."""
    array = make_array("INT16", (1, 3, 5), seed=16)
    status, result = raw_infer(servers["raw_batching"].http_url, array.tobytes())
    assert status == 200, result
    assert_same(result.as_numpy("OUT_INT16"), array, "INT16")


def test_raw_binary_bytes_input(servers):
    """A BYTES [1] input takes the whole body as its one element."""
    payload = b"\x00\xffraw body \x01" * 10
    status, result = raw_infer(servers["raw_bytes"].http_url, payload)
    assert status == 200, result
    assert result.get_output("OUT_BYTES")["shape"] == [1, 1]
    assert result.as_numpy("OUT_BYTES").tolist() == [[payload]]


def test_raw_binary_multi_input_refused(plain):
    status, error = raw_infer(plain.http_url, np.arange(24, dtype=np.float32).tobytes())
    assert status == 400
    assert error == (
        f"{P}Raw request must only have 1 input (found 1) to be deduced but got {len(ALL_DATATYPES)} inputs in "
        f"'{MODEL}' model configuration"
    )


def test_raw_binary_two_variable_dims_refused(servers):
    status, error = raw_infer(servers["raw_two_variable"].http_url, b"\x00" * 8)
    assert status == 400
    assert error == (
        f"{P}The shape of the raw input 'IN_UINT8' can not be deduced because there are more than one "
        "variable-sized dimension"
    )


def test_raw_binary_bytes_variable_shape_refused(servers):
    status, error = raw_infer(servers["raw_bytes_variable"].http_url, b"abc")
    assert status == 400
    assert error == f"{P}For BYTE datatype raw input 'IN_BYTES', the model must have input shape [1]"


def test_servers_still_serve(plain, batching):
    arrays = all_arrays(lambda dt: (2,), seed=99)
    check_http_result(http_infer(plain.http_url, arrays), arrays)
    arrays = all_arrays(lambda dt: (1, 2), seed=98)
    check_http_result(http_infer(batching.http_url, arrays), arrays)
