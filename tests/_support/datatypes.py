"""Every Triton datatype through `tests.models:identity`, per protocol: the arrays to send (extremes, NaN payloads,
odd strings), the servers' arguments, the client paths (sync, callback, stream, asyncio) and the check that what came
back is bit for bit what went out, with the response fields each protocol carries."""

from __future__ import annotations

import asyncio
import queue
import struct
from typing import Any, Callable

import ml_dtypes
import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http as httpclient
import tritonclient.http.aio as httpaio

from tests._support.serving import tensor_args
from tests.models import ALL_DATATYPES

MODEL = "identity"
TIMEOUT_S = 30

NUMPY = {
    "BOOL": np.dtype(np.bool_), "INT8": np.dtype(np.int8), "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64), "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16), "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64),
    "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
    "BF16": np.dtype(ml_dtypes.bfloat16), "BYTES": np.dtype(np.object_),
}
# Same-width unsigned integers, to write float bit patterns.
BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}
# NaN payloads, signalling NaNs, infinities, signed zeros, subnormals, the smallest normal, extremes, one.
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
# Strings that JSON can carry (the HTTP client sends them as UTF-8 text).
TEXT_SPECIAL = [b"", b"hello", "é€😀".encode(), b"tab\tnewline\n\"quote\"\\", b"x" * 300, b"\x01 control"]


def make_array(datatype: str, shape: tuple[int, ...], seed: int = 0, json_safe: bool = False) -> np.ndarray:
    """Extremes and special values first, then random values. `json_safe`: finite floats, UTF-8 strings."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed + ALL_DATATYPES.index(datatype))
    dtype = NUMPY[datatype]
    if datatype == "BYTES":
        pool = TEXT_SPECIAL if json_safe else BYTES_SPECIAL
        array = np.empty(n, dtype=np.object_)
        array[:] = [pool[i % len(pool)] for i in range(n)]
    elif datatype == "BOOL":
        array = rng.integers(0, 2, n).astype(np.bool_)
        array[: min(n, 2)] = [True, False][: min(n, 2)]
    elif datatype in FLOAT_SPECIAL_BITS:
        if json_safe:
            info = ml_dtypes.finfo(dtype)
            special = np.array([0.0, -0.0, info.max, info.min, info.tiny, info.smallest_subnormal, 1.0, -1.5,
                                1 / 3], dtype=dtype)
            scale = 1e6 if dtype.itemsize >= 4 else 1.0
            array = (rng.standard_normal(n) * scale).astype(dtype)
        else:
            bits = BITS[dtype.itemsize]
            special = np.array(FLOAT_SPECIAL_BITS[datatype], dtype=bits).view(dtype)
            array = rng.integers(0, np.iinfo(bits).max, n, dtype=bits, endpoint=True).view(dtype)
        array[: min(n, len(special))] = special[: min(n, len(special))]
    else:
        info = np.iinfo(dtype)
        special = np.array([info.min, info.max, 0, 1, info.min + 1, info.max - 1, info.max // 2], dtype=dtype)
        array = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        array[: min(n, len(special))] = special[: min(n, len(special))]
    return array.reshape(shape)


def all_arrays(shape_of: Callable[[str], tuple[int, ...]], seed: int = 0, datatypes: list[str] = ALL_DATATYPES,
               json_safe: bool = False) -> dict[str, np.ndarray]:
    """One array per datatype, shaped by `shape_of(datatype)`."""
    return {dt: make_array(dt, shape_of(dt), seed, json_safe) for dt in datatypes}


def assert_same(actual: np.ndarray | None, expected: np.ndarray, datatype: str) -> None:
    """Same shape and dtype, same bytes (BYTES: same elements; JSON gives them back as str)."""
    assert actual is not None, f"no output for {datatype}"
    assert actual.shape == expected.shape, datatype
    assert actual.dtype == expected.dtype, datatype
    if datatype == "BYTES":
        got = [x.encode() if isinstance(x, str) else x for x in actual.reshape(-1).tolist()]
        assert got == expected.reshape(-1).tolist(), datatype
    else:
        assert actual.tobytes() == expected.tobytes(), datatype


def server_args(max_batch_size: int, dims: str = "-1", datatypes: list[str] = ALL_DATATYPES) -> list[str]:
    """`tests.models:identity` with IN_<DT> and OUT_<DT> of `dims` for each datatype."""
    return (
        ["--max-batch-size", str(max_batch_size)]
        + tensor_args("input", [(f"IN_{dt}", dt, dims) for dt in datatypes])
        + tensor_args("output", [(f"OUT_{dt}", dt, dims) for dt in datatypes])
    )


def serialized_bytes(array: np.ndarray) -> bytes:
    """BYTES elements as they go on the wire: each one after its 4-byte little-endian length."""
    return b"".join(struct.pack("<I", len(b)) + b for b in array.reshape(-1).tolist())


# ---- gRPC -----------------------------------------------------------------------------------------------------

def grpc_inputs(arrays: dict[str, np.ndarray]) -> list[grpcclient.InferInput]:
    inputs = []
    for datatype, array in arrays.items():
        tensor = grpcclient.InferInput(f"IN_{datatype}", list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def check_grpc_result(result: Any, arrays: dict[str, np.ndarray]) -> None:
    response = result.get_response()
    assert response.model_name == MODEL
    assert response.model_version == "1"
    assert sorted(o.name for o in response.outputs) == sorted(f"OUT_{dt}" for dt in arrays)
    for datatype, array in arrays.items():
        output = next(o for o in response.outputs if o.name == f"OUT_{datatype}")
        assert output.datatype == datatype
        assert list(output.shape) == list(array.shape)
        assert_same(result.as_numpy(f"OUT_{datatype}"), array, datatype)


def grpc_infer(url: str, arrays: dict[str, np.ndarray]) -> Any:
    with grpcclient.InferenceServerClient(url) as c:
        return c.infer(MODEL, grpc_inputs(arrays), client_timeout=TIMEOUT_S)


def grpc_callback(url: str, arrays: dict[str, np.ndarray]) -> Any:
    done: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(url) as c:
        c.async_infer(MODEL, grpc_inputs(arrays), callback=lambda result, error: done.put((result, error)))
        result, error = done.get(timeout=TIMEOUT_S)
    assert error is None, error
    return result


def grpc_stream(url: str, arrays: dict[str, np.ndarray]) -> Any:
    done: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(url) as c:
        c.start_stream(callback=lambda result, error: done.put((result, error)))
        try:
            c.async_stream_infer(MODEL, grpc_inputs(arrays), request_id="s1")
            result, error = done.get(timeout=TIMEOUT_S)
        finally:
            c.stop_stream()
    assert error is None, error
    response = result.get_response()
    assert response.id == "s1"
    assert response.parameters["triton_final_response"].bool_param is True
    return result


def grpc_aio(url: str, arrays: dict[str, np.ndarray]) -> Any:
    async def run() -> Any:
        async with grpcaio.InferenceServerClient(url) as c:
            return await c.infer(MODEL, grpc_inputs(arrays), client_timeout=TIMEOUT_S)

    return asyncio.run(run())


GRPC_PATHS = {"infer": grpc_infer, "async_infer": grpc_callback, "stream": grpc_stream, "aio": grpc_aio}


# ---- HTTP -----------------------------------------------------------------------------------------------------

Binary = bool | dict[str, bool]
"""Binary tensor data (True) or JSON (False), for all tensors or per datatype."""


def http_inputs(arrays: dict[str, np.ndarray], binary: Binary = True) -> list[httpclient.InferInput]:
    inputs = []
    for datatype, array in arrays.items():
        tensor = httpclient.InferInput(f"IN_{datatype}", list(array.shape), datatype)
        tensor.set_data_from_numpy(array, binary_data=binary if isinstance(binary, bool) else binary[datatype])
        inputs.append(tensor)
    return inputs


def http_outputs(datatypes: Any, binary: Binary = True) -> list[httpclient.InferRequestedOutput]:
    return [
        httpclient.InferRequestedOutput(f"OUT_{dt}", binary_data=binary if isinstance(binary, bool) else binary[dt])
        for dt in datatypes
    ]


def check_http_result(result: Any, arrays: dict[str, np.ndarray], binary: Binary | None = True) -> None:
    """`binary`: how each output must have come back (None: either way)."""
    response = result.get_response()
    assert response["model_name"] == MODEL
    assert response["model_version"] == "1"
    assert "id" not in response  # Triton omits an empty id
    assert sorted(o["name"] for o in response["outputs"]) == sorted(f"OUT_{dt}" for dt in arrays)
    for datatype, array in arrays.items():
        output = result.get_output(f"OUT_{datatype}")
        assert output["datatype"] == datatype
        assert output["shape"] == list(array.shape)
        if binary is not None:
            is_binary = binary if isinstance(binary, bool) else binary[datatype]
            if is_binary:
                assert "data" not in output
                size = len(array.tobytes() if datatype != "BYTES" else serialized_bytes(array))
                assert output["parameters"]["binary_data_size"] == size
            else:
                assert "parameters" not in output and "data" in output
        assert_same(result.as_numpy(f"OUT_{datatype}"), array, datatype)


def http_infer(url: str, arrays: dict[str, np.ndarray], binary_in: Binary = True, binary_out: Binary = True,
               **kwargs: Any) -> Any:
    with httpclient.InferenceServerClient(url, network_timeout=TIMEOUT_S) as c:
        return c.infer(MODEL, http_inputs(arrays, binary_in), outputs=http_outputs(arrays, binary_out), **kwargs)


def http_async_infer(url: str, arrays: dict[str, np.ndarray], binary_in: Binary = True, binary_out: Binary = True,
                     **kwargs: Any) -> Any:
    with httpclient.InferenceServerClient(url, network_timeout=TIMEOUT_S, concurrency=2) as c:
        handle = c.async_infer(MODEL, http_inputs(arrays, binary_in), outputs=http_outputs(arrays, binary_out),
                               **kwargs)
        return handle.get_result(timeout=TIMEOUT_S)


def http_aio(url: str, arrays: dict[str, np.ndarray], binary_in: Binary = True, binary_out: Binary = True,
             **kwargs: Any) -> Any:
    async def run() -> Any:
        async with httpaio.InferenceServerClient(url, conn_timeout=TIMEOUT_S) as c:
            return await c.infer(MODEL, http_inputs(arrays, binary_in), outputs=http_outputs(arrays, binary_out),
                                 **kwargs)

    return asyncio.run(run())


HTTP_PATHS = {"infer": http_infer, "async_infer": http_async_infer, "aio": http_aio}


# ---- per protocol ---------------------------------------------------------------------------------------------

PATHS: dict[str, dict[str, Callable[..., Any]]] = {"grpc": GRPC_PATHS, "http": HTTP_PATHS}
CHECK: dict[str, Callable[[Any, dict[str, np.ndarray]], None]] = {"grpc": check_grpc_result,
                                                                  "http": check_http_result}
INPUTS: dict[str, Callable[[dict[str, np.ndarray]], list[Any]]] = {"grpc": grpc_inputs, "http": http_inputs}
