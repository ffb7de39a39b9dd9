"""HTTP extensions end to end: classification (HTTP and gRPC), gzip/deflate both ways, header forwarding."""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
import zlib

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.http.aio as httpaio
from tritonclient.utils import InferenceServerException

from tests._support.clients import url_for
from tests._support.serving import lazy_servers, tensor_args

TIMEOUT_S = 30
IDENTITY_TYPES = [("FP32", np.float32), ("INT32", np.int32), ("FP64", np.float64), ("UINT8", np.uint8)]


def identity_args(max_batch_size: int, dims: str) -> list[str]:
    return (
        ["--max-batch-size", str(max_batch_size)]
        + tensor_args("input", [(f"IN_{dt}", dt, dims) for dt, _ in IDENTITY_TYPES])
        + tensor_args("output", [(f"OUT_{dt}", dt, dims) for dt, _ in IDENTITY_TYPES])
    )


FORWARD = ["--http-header-forward-pattern", "x-.*", "--grpc-header-forward-pattern", "x-.*"]
ECHO = (
    tensor_args("input", [("INPUT", "fp32", "4"), ("TEXT", "bytes", "2")]) + tensor_args("output", [("PARAMS", "bytes", "1")])
)
SERVERS = {
    "batching": ("tests.models:identity", identity_args(4, "6")),
    "plain": ("tests.models:identity", identity_args(0, "-1")),
    "echo": ("tests.models:echo_parameters", ECHO),
    "forward": ("tests.models:echo_parameters", ECHO + FORWARD),
    "forward_upper": ("tests.models:echo_parameters",
                      ECHO + ["--http-header-forward-pattern", "X-FWD", "--grpc-header-forward-pattern", "X-FWD"]),
    "forward_case_sensitive": ("tests.models:echo_parameters",
                               ECHO + ["--http-header-forward-pattern", "(?-i:X-FWD)|(?-i:x-low)"]),
    # Triton's own qa spelling (RE2 accepts a bare "(?-i)"; Python's re only the scoped form).
    "forward_case_sensitive_bare": ("tests.models:echo_parameters",
                                    ECHO + ["--http-header-forward-pattern", "(?-i)X-FWD"]),
}


@pytest.fixture(scope="module")
def servers():
    yield from lazy_servers(SERVERS)


def identity_arrays(shape: tuple[int, ...], seed: int) -> dict[str, np.ndarray]:
    """Distinct values per row (no ties, so the top-k order is defined)."""
    rng = np.random.default_rng(seed)
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    n = shape[-1]
    out = {}
    for dt, dtype in IDENTITY_TYPES:
        if dtype == np.uint8:
            values = np.stack([rng.permutation(250)[:n] for _ in range(rows)])
        elif dtype == np.int32:
            values = np.stack([rng.permutation(2001)[:n] - 1000 for _ in range(rows)]) * 100_003
        else:
            values = np.stack([rng.permutation(10_000)[:n] for _ in range(rows)]) / 7.0 - 500.0
        out[dt] = values.astype(dtype).reshape(shape)
    return out


def expected_classes(array: np.ndarray, k: int, batched: bool) -> list[list[bytes]] | list[bytes]:
    rows = array.reshape(array.shape[0], -1) if batched else array.reshape(1, -1)
    result = []
    for row in rows:
        order = sorted(range(len(row)), key=lambda i: -float(row[i]))[: min(k, len(row))]
        texts = []
        for i in order:
            value = f"{float(row[i]):.6f}" if array.dtype.kind == "f" else str(int(row[i]))
            texts.append(f"{value}:{i}".encode())
        result.append(texts)
    return result if batched else result[0]


# ---- classification ---------------------------------------------------------------------------------------------

def http_inputs(arrays):
    inputs = []
    for dt, array in arrays.items():
        tensor = httpclient.InferInput(f"IN_{dt}", list(array.shape), dt)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def grpc_inputs(arrays):
    inputs = []
    for dt, array in arrays.items():
        tensor = grpcclient.InferInput(f"IN_{dt}", list(array.shape), dt)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def classify(protocol: str, url: str, arrays, counts: dict[str, int], binary: bool = True):
    if protocol == "http":
        outputs = [httpclient.InferRequestedOutput(f"OUT_{dt}", binary_data=binary, class_count=k)
                   for dt, k in counts.items()]
        with httpclient.InferenceServerClient(url) as c:
            return c.infer("identity", http_inputs(arrays), outputs=outputs)
    outputs = [grpcclient.InferRequestedOutput(f"OUT_{dt}", class_count=k) for dt, k in counts.items()]
    with grpcclient.InferenceServerClient(url) as c:
        return c.infer("identity", grpc_inputs(arrays), outputs=outputs, client_timeout=TIMEOUT_S)


def output_meta(protocol: str, result, name: str) -> tuple[str, list[int]]:
    if protocol == "http":
        output = result.get_output(name)
        return output["datatype"], output["shape"]
    output = result.get_output(name)
    return output.datatype, list(output.shape)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("batch", [1, 3])
def test_classification_batching(servers, protocol, batch):
    server = servers["batching"]
    url = url_for(server, protocol)
    arrays = identity_arrays((batch, 6), seed=batch)
    counts = {"FP32": 3, "INT32": 1, "FP64": 6, "UINT8": 10}  # 10 > 6 elements: all of them
    result = classify(protocol, url, arrays, counts)
    for dt, k in counts.items():
        datatype, shape = output_meta(protocol, result, f"OUT_{dt}")
        assert datatype == "BYTES"
        assert shape == [batch, min(k, 6)]
        got = result.as_numpy(f"OUT_{dt}")
        assert got.shape == (batch, min(k, 6))
        assert got.tolist() == expected_classes(arrays[dt], k, batched=True), dt


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_classification_plain(servers, protocol):
    server = servers["plain"]
    url = url_for(server, protocol)
    arrays = identity_arrays((9,), seed=5)
    counts = {"FP32": 2, "INT32": 4, "FP64": 1, "UINT8": 9}
    result = classify(protocol, url, arrays, counts)
    for dt, k in counts.items():
        assert output_meta(protocol, result, f"OUT_{dt}") == ("BYTES", [k])
        assert result.as_numpy(f"OUT_{dt}").tolist() == expected_classes(arrays[dt], k, batched=False), dt


def test_classification_formatting(servers):
    """Floats print with 6 decimals (std::to_string), integers plainly; the largest value first."""
    arrays = {
        "FP32": np.array([0.1, 3.3, -2.5, 1e6], dtype=np.float32),
        "INT32": np.array([7, -100, 2_000_000_000, 0], dtype=np.int32),
        "FP64": np.array([-1.0, -0.5, -2.0, -3.0], dtype=np.float64),
        "UINT8": np.array([0, 255, 1, 2], dtype=np.uint8),
    }
    result = classify("http", servers["plain"].http_url, arrays, {"FP32": 4, "INT32": 2, "FP64": 2, "UINT8": 3})
    assert result.as_numpy("OUT_FP32").tolist() == [b"1000000.000000:3", b"3.300000:1", b"0.100000:0",
                                                    b"-2.500000:2"]
    assert result.as_numpy("OUT_INT32").tolist() == [b"2000000000:2", b"7:0"]
    assert result.as_numpy("OUT_FP64").tolist() == [b"-0.500000:1", b"-1.000000:0"]
    assert result.as_numpy("OUT_UINT8").tolist() == [b"255:1", b"2:3", b"1:2"]


def test_classification_json_output_and_mixed(servers):
    """Classification with a JSON output gives strings in `data`; unclassified outputs are unchanged."""
    arrays = identity_arrays((2, 6), seed=8)
    outputs = [httpclient.InferRequestedOutput("OUT_FP32", binary_data=False, class_count=2),
               httpclient.InferRequestedOutput("OUT_INT32", binary_data=True)]
    with httpclient.InferenceServerClient(servers["batching"].http_url) as c:
        result = c.infer("identity", http_inputs(arrays), outputs=outputs)
    output = result.get_output("OUT_FP32")
    assert output["datatype"] == "BYTES" and output["shape"] == [2, 2]
    assert output["data"] == [s.decode() for row in expected_classes(arrays["FP32"], 2, True) for s in row]
    np.testing.assert_array_equal(result.as_numpy("OUT_INT32"), arrays["INT32"])


@pytest.mark.parametrize("count", [-1, "2"])
def test_classification_count_must_be_a_whole_number_http(servers, count):
    """(0 asks for no classification, as in tritonserver 2.51: tests/e2e/test_triton_parity_classification.py)"""
    body = json.dumps({
        "inputs": [{"name": f"IN_{dt}", "datatype": dt, "shape": [1, 6], "data": [1, 2, 3, 4, 5, 6]}
                   for dt, _ in IDENTITY_TYPES],
        "outputs": [{"name": "OUT_FP32", "parameters": {"classification": count}}],
    }).encode()
    status, _, data = raw_post(servers["batching"].http_url, "/v2/models/identity/infer", body)
    assert status == 400
    assert "classification" in json.loads(data)["error"]


# ---- compression --------------------------------------------------------------------------------------------------

def raw_post(url: str, path: str, body: bytes, headers: dict[str, str] | None = None):
    conn = http.client.HTTPConnection(url, timeout=TIMEOUT_S)
    try:
        conn.request("POST", path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def json_request(arrays, binary_output: bool = False) -> bytes:
    return json.dumps({
        "inputs": [{"name": f"IN_{dt}", "datatype": dt, "shape": list(a.shape), "data": a.reshape(-1).tolist()}
                   for dt, a in arrays.items()],
        "parameters": {"binary_data_output": binary_output},
    }).encode()


ALGORITHMS = [None, "gzip", "deflate"]


@pytest.mark.parametrize("request_algorithm", ALGORITHMS)
@pytest.mark.parametrize("response_algorithm", ALGORITHMS)
def test_compression_with_tritonclient(servers, request_algorithm, response_algorithm):
    arrays = identity_arrays((2, 6), seed=11)
    with httpclient.InferenceServerClient(servers["batching"].http_url) as c:
        result = c.infer("identity", http_inputs(arrays), request_compression_algorithm=request_algorithm,
                         response_compression_algorithm=response_algorithm)
    for dt, array in arrays.items():
        np.testing.assert_array_equal(result.as_numpy(f"OUT_{dt}"), array)


@pytest.mark.parametrize("algorithms", [("gzip", "deflate"), ("deflate", "gzip")])
def test_compression_with_aio_client(servers, algorithms):
    arrays = identity_arrays((4, 6), seed=12)

    async def run():
        async with httpaio.InferenceServerClient(servers["batching"].http_url) as c:
            return await c.infer("identity", http_inputs(arrays), request_compression_algorithm=algorithms[0],
                                 response_compression_algorithm=algorithms[1])

    result = asyncio.run(run())
    for dt, array in arrays.items():
        np.testing.assert_array_equal(result.as_numpy(f"OUT_{dt}"), array)


def test_large_compressed_request(servers):
    """A 4 MiB tensor, gzip both ways (compresses well, so the body on the wire is small)."""
    big = np.tile(np.arange(1024, dtype=np.float64), 512)
    arrays = {"FP32": big.astype(np.float32), "INT32": big.astype(np.int32), "FP64": big,
              "UINT8": big.astype(np.uint8)}
    with httpclient.InferenceServerClient(servers["plain"].http_url) as c:
        result = c.infer("identity", http_inputs(arrays), request_compression_algorithm="gzip",
                         response_compression_algorithm="gzip")
    for dt, array in arrays.items():
        np.testing.assert_array_equal(result.as_numpy(f"OUT_{dt}"), array)


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_large_incompressible_compressed_request(servers, algorithm):
    """Random tensors stay large after compression: the compressed body is received straight into its own
    buffer, then decompressed."""
    rng = np.random.default_rng(7)
    arrays = {dt: rng.integers(0, 100, 50_000).astype(np_dt) for dt, np_dt in IDENTITY_TYPES}
    with httpclient.InferenceServerClient(servers["plain"].http_url) as c:
        for _ in range(2):  # the second request reuses the first one's body buffer when the sizes match
            result = c.infer("identity", http_inputs(arrays), request_compression_algorithm=algorithm)
            for dt, array in arrays.items():
                np.testing.assert_array_equal(result.as_numpy(f"OUT_{dt}"), array)


@pytest.mark.parametrize(
    "accept, expected",
    [
        ("gzip;q=0.5, deflate;q=0.9", "deflate"),
        ("deflate;q=0.2, gzip;q=0.8", "gzip"),
        ("gzip", "gzip"),
        ("deflate", "deflate"),
        ("identity", None),
        ("gzip;q=0, identity", None),
        ("br", None),
    ],
)
def test_accept_encoding(servers, accept, expected):
    arrays = identity_arrays((1, 6), seed=13)
    for binary_output in (False, True):
        status, headers, body = raw_post(servers["batching"].http_url, "/v2/models/identity/infer",
                                         json_request(arrays, binary_output), {"Accept-Encoding": accept})
        assert status == 200, body
        assert headers.get("content-encoding") == expected
        if expected == "gzip":
            body = gzip.decompress(body)
        elif expected == "deflate":
            body = zlib.decompress(body)  # HTTP "deflate" is a zlib stream
        length = headers.get("inference-header-content-length")
        result = httpclient.InferResult.from_response_body(body, header_length=None if length is None else int(length))
        for dt, array in arrays.items():
            np.testing.assert_array_equal(result.as_numpy(f"OUT_{dt}"), array)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_raw_compressed_request(servers, encoding):
    arrays = identity_arrays((1, 6), seed=14)
    body = json_request(arrays)
    compressed = gzip.compress(body) if encoding == "gzip" else zlib.compress(body)
    status, headers, data = raw_post(servers["batching"].http_url, "/v2/models/identity/infer", compressed,
                                     {"Content-Encoding": encoding, "Content-Type": "application/json"})
    assert status == 200, data
    assert "content-encoding" not in headers
    result = httpclient.InferResult.from_response_body(data)
    for dt, array in arrays.items():
        np.testing.assert_array_equal(result.as_numpy(f"OUT_{dt}"), array)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_corrupt_compressed_body(servers, encoding):
    status, headers, data = raw_post(servers["batching"].http_url, "/v2/models/identity/infer",
                                     b"\x1f\x8b\x08\x00garbage" * 3, {"Content-Encoding": encoding})
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert json.loads(data)["error"]
    test_raw_compressed_request(servers, encoding)  # still serving


# ---- header forwarding ------------------------------------------------------------------------------------------

def echo_http(url: str, headers: dict[str, str], parameters: dict | None = None):
    x = httpclient.InferInput("INPUT", [4], "FP32")
    x.set_data_from_numpy(np.zeros(4, dtype=np.float32))
    text = httpclient.InferInput("TEXT", [2], "BYTES")
    text.set_data_from_numpy(np.array([b"a", b"b"], dtype=np.object_))
    with httpclient.InferenceServerClient(url) as c:
        result = c.infer("echo_parameters", [x, text], headers=headers, parameters=parameters)
    return result.as_numpy("PARAMS").tolist()[0].decode()


def echo_grpc(url: str, headers: dict[str, str], parameters: dict | None = None):
    x = grpcclient.InferInput("INPUT", [4], "FP32")
    x.set_data_from_numpy(np.zeros(4, dtype=np.float32))
    text = grpcclient.InferInput("TEXT", [2], "BYTES")
    text.set_data_from_numpy(np.array([b"a", b"b"], dtype=np.object_))
    with grpcclient.InferenceServerClient(url) as c:
        result = c.infer("echo_parameters", [x, text], headers=headers, parameters=parameters,
                         client_timeout=TIMEOUT_S)
    return result.as_numpy("PARAMS").tolist()[0].decode()


ECHO_CALLS = {"http": (echo_http, "http_url"), "grpc": (echo_grpc, "grpc_url")}


def call_echo(server, protocol: str, headers: dict[str, str], parameters: dict | None = None) -> str:
    call, attribute = ECHO_CALLS[protocol]
    return call(getattr(server, attribute), headers, parameters)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_forwarded_headers_reach_the_callable(servers, protocol):
    params = call_echo(servers["forward"], protocol, {"x-trace-id": "abc-123", "x-user": "some user",
                                                      "other-header": "not forwarded"}, {"k": 7})
    assert params == "k=7;x-trace-id='abc-123';x-user='some user'"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_no_matching_headers_forward_nothing(servers, protocol):
    assert call_echo(servers["forward"], protocol, {"y-header": "1", "xheader": "2"}) == ""


def test_forward_pattern_matches_anywhere_http(servers):
    """Triton uses RE2::PartialMatch: 'x-.*' also matches inside a header name."""
    assert call_echo(servers["forward"], "http", {"my-x-header": "1", "z": "2"}) == "my-x-header='1'"


def test_forward_pattern_matches_anywhere_grpc(servers):
    assert call_echo(servers["forward"], "grpc", {"my-x-header": "1", "z": "2"}) == "my-x-header='1'"


def test_forward_pattern_is_case_insensitive_http(servers):
    """Triton prefixes the pattern with (?i): header names are case-insensitive."""
    params = call_echo(servers["forward_upper"], "http", {"x-fwd": "lower", "X-Fwd-Two": "mixed"})
    assert params == "x-fwd='lower';x-fwd-two='mixed'"


def test_forward_pattern_is_case_insensitive_grpc(servers):
    assert call_echo(servers["forward_upper"], "grpc", {"x-fwd": "lower"}) == "x-fwd='lower'"


def test_forward_pattern_case_sensitive_override_http(servers):
    """`(?-i:...)` turns the case-insensitivity off again (header names arrive lower-cased)."""
    assert call_echo(servers["forward_case_sensitive"], "http", {"x-fwd": "lower", "x-low": "1"}) == "x-low='1'"


def test_forward_pattern_bare_case_sensitive_flag_http(servers):
    assert call_echo(servers["forward_case_sensitive_bare"], "http", {"x-fwd": "lower"}) == ""


def test_forwarded_reserved_header_refused_http(servers):
    with pytest.raises(InferenceServerException) as info:
        call_echo(servers["forward"], "http", {"triton_x-thing": "1"})
    assert info.value.status() == "400"
    assert info.value.message() == "Header 'triton_x-thing' is reserved for Triton usage and cannot be forwarded."
    assert call_echo(servers["forward"], "http", {"x-ok": "1"}) == "x-ok='1'"


def test_forwarded_reserved_header_refused_grpc(servers):
    with pytest.raises(InferenceServerException) as info:
        call_echo(servers["forward"], "grpc", {"triton_x-thing": "1"})
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert info.value.message() == "Header 'triton_x-thing' is reserved for Triton usage and cannot be forwarded."


def test_headers_not_forwarded_without_pattern(servers):
    for protocol in ("http", "grpc"):
        assert call_echo(servers["echo"], protocol, {"x-trace-id": "abc"}) == ""
