"""Over gRPC only: every Triton datatype as typed `InferTensorContents` (hand-built requests, unary and on the
stream), and several requests in flight on one callback client. The round trips both protocols share:
tests/e2e/test_datatypes.py.
"""

from __future__ import annotations

import queue
import struct

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests._support.datatypes import (
    MODEL, NUMPY, TIMEOUT_S, all_arrays, assert_same, check_grpc_result, grpc_inputs, make_array, server_args,
)
from tests._support.serving import serve
from tests.models import ALL_DATATYPES


@pytest.fixture(scope="module")
def plain_server():
    with serve("tests.models:identity", *server_args(0)) as server:
        yield server


def test_concurrent_requests_keep_their_data(plain_server):
    """Several requests in flight at once (callback API) each get their own outputs back."""
    done: queue.Queue = queue.Queue()
    sent = {}
    with grpcclient.InferenceServerClient(plain_server.grpc_url) as c:
        for i in range(8):
            arrays = all_arrays(lambda dt: (1 + i * 1000,), seed=200 + i)
            sent[str(i)] = arrays
            c.async_infer(
                MODEL, grpc_inputs(arrays), request_id=str(i), callback=lambda result, error: done.put((result, error))
            )
        for _ in range(8):
            result, error = done.get(timeout=TIMEOUT_S)
            assert error is None, error
            check_grpc_result(result, sent[result.get_response().id])


# ---- typed InferTensorContents --------------------------------------------------------------------------------

TYPED = ["BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "FP32", "FP64", "BYTES"]
FIELD = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
    "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents", "UINT32": "uint_contents",
    "UINT64": "uint64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}


@pytest.fixture(scope="module")
def typed_stub(plain_server):
    channel = grpc.insecure_channel(plain_server.grpc_url)
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


def typed_request(arrays: dict[str, np.ndarray]) -> service_pb2.ModelInferRequest:
    """Every input as typed contents; FP16 and BF16 have no typed field, so they go as empty contents of shape [0]."""
    request = service_pb2.ModelInferRequest(model_name=MODEL)
    for datatype in ("FP16", "BF16"):
        request.inputs.add(name=f"IN_{datatype}", datatype=datatype, shape=[0]).contents.SetInParent()
    for datatype, array in arrays.items():
        tensor = request.inputs.add(name=f"IN_{datatype}", datatype=datatype, shape=list(array.shape))
        values = array.reshape(-1).tolist()
        if datatype in ("FP32", "FP64"):
            values = [float(v) for v in values]
        getattr(tensor.contents, FIELD[datatype]).extend(values)
    return request


def raw_outputs(response) -> dict[str, np.ndarray]:
    out = {}
    for tensor, raw in zip(response.outputs, response.raw_output_contents):
        result = service_pb2.ModelInferResponse(outputs=[tensor], raw_output_contents=[raw])
        out[tensor.name[4:]] = grpcclient.InferResult(result).as_numpy(tensor.name)
    return out


def test_typed_contents_round_trip(typed_stub):
    arrays = {dt: make_array(dt, (6,) if dt != "BYTES" else (9,), seed=21) for dt in TYPED}
    # Values that survive the float -> protobuf float conversion exactly; infinities and signed zeros included.
    arrays["FP32"] = np.array([0.0, -0.0, np.inf, -np.inf, 3.5, np.finfo(np.float32).max], dtype=np.float32)
    arrays["FP64"] = np.array([np.nan, -0.0, np.inf, 5e-324, 1.7976931348623157e308, -1.5], dtype=np.float64)
    response = typed_stub.ModelInfer(typed_request(arrays), timeout=TIMEOUT_S)
    outputs = raw_outputs(response)
    assert set(outputs) == set(ALL_DATATYPES)
    for datatype in ("FP16", "BF16"):
        assert_same(outputs[datatype], np.empty(0, dtype=NUMPY[datatype]), datatype)
    for datatype, array in arrays.items():
        assert_same(outputs[datatype], array, datatype)


def test_typed_contents_packed_int8_int16_uint16(typed_stub):
    """INT8/INT16/UINT8/UINT16 ride in 32-bit fields; the server keeps the low bytes of each value."""
    arrays = {dt: make_array(dt, (1,), seed=1) for dt in TYPED}
    arrays["INT8"] = np.array([-128, -1, 0, 1, 127], dtype=np.int8)
    arrays["INT16"] = np.array([-32768, -1, 0, 1, 32767, 1234], dtype=np.int16)
    arrays["UINT8"] = np.array([0, 1, 255], dtype=np.uint8)
    arrays["UINT16"] = np.array([0, 1, 65535, 40000], dtype=np.uint16)
    arrays["BYTES"] = np.array([b"", b"\xff\x00", b"abc"], dtype=np.object_)
    for dt in arrays:
        if dt not in ("INT8", "INT16", "UINT8", "UINT16", "BYTES"):
            arrays[dt] = arrays[dt].reshape(1)
    response = typed_stub.ModelInfer(typed_request(arrays), timeout=TIMEOUT_S)
    outputs = raw_outputs(response)
    for datatype, array in arrays.items():
        assert_same(outputs[datatype], array, datatype)
    # The wire bytes of BYTES outputs are the length-prefixed elements.
    index = [o.name for o in response.outputs].index("OUT_BYTES")
    assert response.raw_output_contents[index] == b"".join(struct.pack("<I", len(b)) + b for b in arrays["BYTES"])


def test_typed_contents_keep_low_bytes(typed_stub):
    """Like Triton, values of a 32-bit field outside the INT8/INT16/UINT8/UINT16 range keep only their low bytes."""
    arrays = {dt: make_array(dt, (1,), seed=2) for dt in TYPED}
    request = typed_request(arrays)
    wide = {
        "INT8": ([200, -129, 0x12345678, -1], np.array([-56, 127, 0x78, -1], dtype=np.int8)),
        "INT16": ([40000, -32769, 0x12345678], np.array([-25536, 32767, 0x5678], dtype=np.int16)),
        "UINT8": ([256 + 7, 0xFFFFFFFF], np.array([7, 255], dtype=np.uint8)),
        "UINT16": ([65536 + 9, 0xFFFFFFFF], np.array([9, 65535], dtype=np.uint16)),
    }
    for tensor in request.inputs:
        if tensor.datatype in wide:
            values, _ = wide[tensor.datatype]
            field = getattr(tensor.contents, FIELD[tensor.datatype])
            del field[:]
            field.extend(values)
            tensor.shape[:] = [len(values)]
    response = typed_stub.ModelInfer(request, timeout=TIMEOUT_S)
    outputs = raw_outputs(response)
    for datatype, (_, expected) in wide.items():
        assert_same(outputs[datatype], expected, datatype)


def test_typed_contents_zero_size(typed_stub):
    """An input with `contents` present but no values is a zero-element tensor."""
    request = service_pb2.ModelInferRequest(model_name=MODEL)
    for datatype in ALL_DATATYPES:
        tensor = request.inputs.add(name=f"IN_{datatype}", datatype=datatype, shape=[0])
        tensor.contents.SetInParent()
    response = typed_stub.ModelInfer(request, timeout=TIMEOUT_S)
    outputs = raw_outputs(response)
    assert set(outputs) == set(ALL_DATATYPES)
    for datatype in ALL_DATATYPES:
        assert outputs[datatype].shape == (0,)
        assert outputs[datatype].dtype == NUMPY[datatype]


def test_typed_contents_over_stream(typed_stub):
    arrays = {dt: make_array(dt, (4,), seed=31) for dt in TYPED}
    arrays["FP32"] = np.array([1.0, -2.5, np.inf, 0.0], dtype=np.float32)
    responses = list(typed_stub.ModelStreamInfer(iter([typed_request(arrays)]), timeout=TIMEOUT_S))
    assert len(responses) == 1
    assert responses[0].error_message == ""
    response = responses[0].infer_response
    assert response.parameters["triton_final_response"].bool_param is True
    outputs = raw_outputs(response)
    for datatype, array in arrays.items():
        assert_same(outputs[datatype], array, datatype)
