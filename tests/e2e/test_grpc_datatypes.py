"""Every Triton datatype round-trips bit-exactly through `tests.models:identity` over gRPC.

Paths: sync `infer`, `async_infer` with a callback, the bidirectional stream, the asyncio client, and
hand-built requests with typed `InferTensorContents`. Batching and non-batching models, zero-size and
large tensors, and a server that puts every tensor into shared memory (PYTRITON_INLINE_MAX_BYTES=0).
"""

from __future__ import annotations

import asyncio
import queue
import struct

import grpc
import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests._support.serving import serve, tensor_args
from tests.models import ALL_DATATYPES

MODEL = "identity"
TIMEOUT_S = 30

NUMPY = {
    "BOOL": np.dtype(np.bool_),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "BYTES": np.dtype(np.object_),
}
# Same-width unsigned integers, to write float bit patterns (NaN payloads, signalling NaNs, subnormals).
BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}
FLOAT_SPECIAL_BITS = {
    "FP16": [0x7E00, 0xFE00, 0x7C01, 0x7D55, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x8001, 0x0400, 0x7BFF, 0xFBFF,
             0x3C00],
    "BF16": [0x7FC0, 0xFFC0, 0x7F81, 0x7FAB, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001, 0x8001, 0x0080, 0x7F7F, 0xFF7F,
             0x3F80],
    "FP32": [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FA5A5A5, 0x7F800000, 0xFF800000, 0x00000000, 0x80000000,
             0x00000001, 0x80000001, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000],
    "FP64": [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF5A5A5A5A5A5A5, 0x7FF0000000000000,
             0xFFF0000000000000, 0x0, 0x8000000000000000, 0x1, 0x8000000000000001, 0x0010000000000000,
             0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x3FF0000000000000],
}
BYTES_SPECIAL = [b"", b"\xff\xfe\x00\x80", b"hello", b"\x00", b"\x00\x00trailing\x00\x00", "é€😀".encode(), b"",
                 bytes(range(256)), b"x" * 1000]


def make_array(datatype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Extremes and special values first, then random values, in the requested shape."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed + ALL_DATATYPES.index(datatype))
    dtype = NUMPY[datatype]
    if datatype == "BYTES":
        items = [BYTES_SPECIAL[i % len(BYTES_SPECIAL)] for i in range(n)]
        array = np.empty(n, dtype=np.object_)
        array[:] = items
    elif datatype == "BOOL":
        array = (np.arange(n) % 3 == 0) if n < 8 else rng.integers(0, 2, n).astype(np.bool_)
    elif datatype in FLOAT_SPECIAL_BITS:
        bits = BITS[dtype.itemsize]
        special = np.array(FLOAT_SPECIAL_BITS[datatype], dtype=bits)
        random = rng.integers(0, np.iinfo(bits).max, n, dtype=bits, endpoint=True)
        random[: min(n, len(special))] = special[: min(n, len(special))]
        array = random.view(dtype)
    else:
        info = np.iinfo(dtype)
        special = np.array([info.min, info.max, 0, 1, info.min + 1, info.max - 1, info.max // 2], dtype=dtype)
        array = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        array[: min(n, len(special))] = special[: min(n, len(special))]
    return array.reshape(shape)


def assert_same(actual: np.ndarray | None, expected: np.ndarray, datatype: str) -> None:
    assert actual is not None, f"no output for {datatype}"
    assert actual.dtype == expected.dtype, datatype
    assert actual.shape == expected.shape, datatype
    if datatype == "BYTES":
        assert actual.tolist() == expected.tolist(), datatype
    else:
        assert actual.tobytes() == expected.tobytes(), datatype


def make_inputs(arrays: dict[str, np.ndarray]) -> list[grpcclient.InferInput]:
    inputs = []
    for datatype, array in arrays.items():
        tensor = grpcclient.InferInput(f"IN_{datatype}", list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def all_arrays(shape_of, seed: int = 0) -> dict[str, np.ndarray]:
    return {dt: make_array(dt, shape_of(dt), seed) for dt in ALL_DATATYPES}


def check_result(result, arrays: dict[str, np.ndarray]) -> None:
    response = result.get_response()
    assert response.model_name == MODEL
    assert response.model_version == "1"
    assert sorted(o.name for o in response.outputs) == sorted(f"OUT_{dt}" for dt in arrays)
    for datatype, array in arrays.items():
        output = next(o for o in response.outputs if o.name == f"OUT_{datatype}")
        assert output.datatype == datatype
        assert list(output.shape) == list(array.shape)
        assert_same(result.as_numpy(f"OUT_{datatype}"), array, datatype)


def server_args(max_batch_size: int, dims: str = "-1", datatypes=ALL_DATATYPES) -> list[str]:
    return (
        ["--max-batch-size", str(max_batch_size)]
        + tensor_args("input", [(f"IN_{dt}", dt, dims) for dt in datatypes])
        + tensor_args("output", [(f"OUT_{dt}", dt, dims) for dt in datatypes])
    )


@pytest.fixture(scope="module")
def batching_server():
    with serve("tests.models:identity", *server_args(8)) as server:
        yield server


@pytest.fixture(scope="module")
def plain_server():
    with serve("tests.models:identity", *server_args(0)) as server:
        yield server


@pytest.fixture(scope="module")
def shm_only_server():
    with serve("tests.models:identity", *server_args(0), env={"PYTRITON_INLINE_MAX_BYTES": "0"}) as server:
        yield server


@pytest.fixture(scope="module")
def client(plain_server):
    c = grpcclient.InferenceServerClient(plain_server.grpc_url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def batching_client(batching_server):
    c = grpcclient.InferenceServerClient(batching_server.grpc_url)
    yield c
    c.close()


# ---- the four client paths ------------------------------------------------------------------------------------

def infer_sync(url: str, arrays: dict[str, np.ndarray]):
    with grpcclient.InferenceServerClient(url) as c:
        return c.infer(MODEL, make_inputs(arrays), client_timeout=TIMEOUT_S)


def infer_callback(url: str, arrays: dict[str, np.ndarray]):
    done: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(url) as c:
        c.async_infer(MODEL, make_inputs(arrays), callback=lambda result, error: done.put((result, error)))
        result, error = done.get(timeout=TIMEOUT_S)
    assert error is None, error
    return result


def infer_stream(url: str, arrays: dict[str, np.ndarray]):
    done: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(url) as c:
        c.start_stream(callback=lambda result, error: done.put((result, error)))
        try:
            c.async_stream_infer(MODEL, make_inputs(arrays), request_id="s1")
            result, error = done.get(timeout=TIMEOUT_S)
        finally:
            c.stop_stream()
    assert error is None, error
    response = result.get_response()
    assert response.id == "s1"
    assert response.parameters["triton_final_response"].bool_param is True
    return result


def infer_aio(url: str, arrays: dict[str, np.ndarray]):
    async def run():
        async with grpcaio.InferenceServerClient(url) as c:
            return await c.infer(MODEL, make_inputs(arrays), client_timeout=TIMEOUT_S)

    return asyncio.run(run())


PATHS = {"infer": infer_sync, "async_infer": infer_callback, "stream": infer_stream, "aio": infer_aio}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("batch", [1, 3])
def test_batching_model_round_trip(batching_server, path, batch):
    arrays = all_arrays(lambda dt: (batch, 7 + ALL_DATATYPES.index(dt)), seed=batch)
    check_result(PATHS[path](batching_server.grpc_url, arrays), arrays)


@pytest.mark.parametrize("path", PATHS)
def test_plain_model_round_trip(plain_server, path):
    arrays = all_arrays(lambda dt: (20 + ALL_DATATYPES.index(dt),), seed=7)
    check_result(PATHS[path](plain_server.grpc_url, arrays), arrays)


def test_plain_model_single_element(client):
    arrays = all_arrays(lambda dt: (1,), seed=3)
    check_result(client.infer(MODEL, make_inputs(arrays)), arrays)


def test_metadata_lists_every_datatype(client, batching_client):
    for c, lead in ((client, []), (batching_client, ["-1"])):
        meta = c.get_model_metadata(MODEL, as_json=True)
        assert [i["datatype"] for i in meta["inputs"]] == ALL_DATATYPES
        assert [o["datatype"] for o in meta["outputs"]] == ALL_DATATYPES
        assert all(i["shape"] == lead + ["-1"] for i in meta["inputs"])
    config = client.get_model_config(MODEL, as_json=True)["config"]
    assert [i["data_type"] for i in config["input"]] == [
        "TYPE_" + ("STRING" if dt == "BYTES" else dt) for dt in ALL_DATATYPES
    ]


# ---- zero-size, mixed and large tensors -----------------------------------------------------------------------

@pytest.mark.parametrize("path", ["infer", "stream"])
def test_zero_size_plain(plain_server, path):
    arrays = all_arrays(lambda dt: (0,))
    check_result(PATHS[path](plain_server.grpc_url, arrays), arrays)


@pytest.mark.parametrize("path", ["infer", "aio"])
@pytest.mark.parametrize("shape", [(2, 0), (0, 3)])
def test_zero_size_batching(batching_server, path, shape):
    arrays = all_arrays(lambda dt: shape)
    check_result(PATHS[path](batching_server.grpc_url, arrays), arrays)


def test_zero_size_next_to_data(client):
    arrays = all_arrays(lambda dt: (0,) if ALL_DATATYPES.index(dt) % 2 else (5,), seed=11)
    check_result(client.infer(MODEL, make_inputs(arrays)), arrays)


@pytest.mark.parametrize("path", ["infer", "aio"])
def test_large_tensor(plain_server, path):
    """4 MiB of FP32 and 1 MiB of BYTES next to small tensors: over the inline limit, so through shared memory."""
    big = {"FP32": (1 << 20,), "BYTES": (1 << 10,), "UINT8": (3 << 20,)}
    arrays = all_arrays(lambda dt: big.get(dt, (2,)), seed=5)
    arrays["BYTES"] = np.array([bytes([i % 256]) * 1024 for i in range(1024)], dtype=np.object_)
    check_result(PATHS[path](plain_server.grpc_url, arrays), arrays)


def test_many_requests_reuse_buffers(client):
    """Sequential large and small requests must not see each other's bytes."""
    for i in range(6):
        size = (1 << 18) if i % 2 else 3
        arrays = all_arrays(lambda dt: (size if dt != "BYTES" else 3 + i,), seed=100 + i)
        check_result(client.infer(MODEL, make_inputs(arrays)), arrays)


@pytest.mark.parametrize("path", PATHS)
def test_shm_only_server_round_trip(shm_only_server, path):
    arrays = all_arrays(lambda dt: (9 + ALL_DATATYPES.index(dt),), seed=13)
    check_result(PATHS[path](shm_only_server.grpc_url, arrays), arrays)


def test_shm_only_server_zero_size_and_large(shm_only_server):
    for shape_of in (lambda dt: (0,), lambda dt: (1 << 20,) if dt == "FP32" else (1,)):
        arrays = all_arrays(shape_of, seed=17)
        check_result(infer_sync(shm_only_server.grpc_url, arrays), arrays)


def test_concurrent_requests_keep_their_data(plain_server):
    """Several requests in flight at once (callback API) each get their own outputs back."""
    done: queue.Queue = queue.Queue()
    sent = {}
    with grpcclient.InferenceServerClient(plain_server.grpc_url) as c:
        for i in range(8):
            arrays = all_arrays(lambda dt: (1 + i * 1000,), seed=200 + i)
            sent[str(i)] = arrays
            c.async_infer(
                MODEL, make_inputs(arrays), request_id=str(i), callback=lambda result, error: done.put((result, error))
            )
        for _ in range(8):
            result, error = done.get(timeout=TIMEOUT_S)
            assert error is None, error
            check_result(result, sent[result.get_response().id])


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
