"""The same requests over gRPC and HTTP (binary) give identical outputs, and both report the same statistics."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import json_format

from tests._support.serving import serve, tensor_args

MODEL = "identity"
TIMEOUT_S = 30
DATATYPES = {"FP32": np.float32, "INT64": np.int64, "BYTES": np.object_, "FP16": np.float16, "BOOL": np.bool_,
             "BF16": ml_dtypes.bfloat16, "UINT8": np.uint8}
INT_FIELDS = {"count", "ns", "last_inference", "inference_count", "execution_count", "batch_size", "id", "byte_size"}


@pytest.fixture(scope="module")
def server():
    args = (["--max-batch-size", "8"] + tensor_args("input", [(f"IN_{dt}", dt, "-1") for dt in DATATYPES])
            + tensor_args("output", [(f"OUT_{dt}", dt, "-1") for dt in DATATYPES]))
    with serve("tests.models:identity", *args) as s:
        yield s


@pytest.fixture(scope="module")
def clients(server):
    g = grpcclient.InferenceServerClient(server.grpc_url)
    h = httpclient.InferenceServerClient(server.http_url, network_timeout=TIMEOUT_S)
    yield g, h
    g.close()
    h.close()


def arrays_for(shape: tuple[int, ...], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    out = {}
    for dt, dtype in DATATYPES.items():
        if dt == "BYTES":
            values = np.array([bytes(rng.integers(0, 256, i % 9, dtype=np.uint8)) for i in range(n)], dtype=object)
        elif dt == "BOOL":
            values = rng.integers(0, 2, n).astype(np.bool_)
        elif dt == "UINT8":
            values = rng.permutation(256)[:n].astype(np.uint8) if n <= 256 else rng.integers(0, 256, n).astype(
                np.uint8)
        else:
            values = (rng.standard_normal(n) * 100).astype(dtype)
        out[dt] = values.reshape(shape)
    return out


# Each case: (input shape, requested outputs as {datatype: class_count or 0} or None for all, request id, seed).
CASES = {
    "batch_1": ((1, 5), None, "", 1),
    "batch_8": ((8, 3), None, "", 2),
    "zero_size": ((2, 0), None, "", 3),
    "zero_batch": ((0, 4), None, "", 4),
    "large": ((1, 300_000), None, "", 5),
    "subset_of_outputs": ((3, 4), {"FP32": 0, "BYTES": 0}, "", 6),
    "with_request_id": ((2, 2), None, "parity-id", 7),
    "classification": ((4, 6), {"FP32": 3, "INT64": 6, "UINT8": 2}, "", 8),
}


def grpc_infer(client, arrays, outputs, request_id):
    inputs = []
    for dt, array in arrays.items():
        tensor = grpcclient.InferInput(f"IN_{dt}", list(array.shape), dt)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    requested = None if outputs is None else [
        grpcclient.InferRequestedOutput(f"OUT_{dt}", class_count=k) for dt, k in outputs.items()]
    return client.infer(MODEL, inputs, outputs=requested, request_id=request_id, client_timeout=TIMEOUT_S)


def http_infer(client, arrays, outputs, request_id):
    inputs = []
    for dt, array in arrays.items():
        tensor = httpclient.InferInput(f"IN_{dt}", list(array.shape), dt)
        tensor.set_data_from_numpy(array, binary_data=True)
        inputs.append(tensor)
    requested = None if outputs is None else [
        httpclient.InferRequestedOutput(f"OUT_{dt}", binary_data=True, class_count=k) for dt, k in outputs.items()]
    return client.infer(MODEL, inputs, outputs=requested, request_id=request_id)


def described_outputs(protocol: str, result) -> dict[str, tuple[str, list[int], Any]]:
    """{name: (datatype, shape, array)} of a result."""
    out = {}
    if protocol == "grpc":
        response = result.get_response()
        meta = {"model_name": response.model_name, "model_version": response.model_version, "id": response.id}
        entries = [(o.name, o.datatype, [int(d) for d in o.shape]) for o in response.outputs]
    else:
        response = result.get_response()
        meta = {"model_name": response["model_name"], "model_version": response["model_version"],
                "id": response.get("id", "")}
        entries = [(o["name"], o["datatype"], o["shape"]) for o in response["outputs"]]
    for name, datatype, shape in entries:
        out[name] = (datatype, shape, result.as_numpy(name))
    return {"meta": meta, "outputs": out}


def normalise_grpc_stats(response) -> dict:
    """gRPC statistics as Triton's HTTP JSON: every field present, int64s as numbers."""
    data = json_format.MessageToDict(response, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)

    def fix(value, key=None):
        if isinstance(value, dict):
            return {k: fix(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v, key) for v in value]
        if key in INT_FIELDS and isinstance(value, str):
            return int(value)
        return value

    return fix(data)


def read_statistics(clients) -> tuple[dict, dict]:
    g, h = clients
    return normalise_grpc_stats(g.get_inference_statistics(MODEL, as_json=False)), h.get_inference_statistics(MODEL)


@pytest.mark.parametrize("case", CASES)
def test_grpc_and_http_agree(clients, case):
    shape, outputs, request_id, seed = CASES[case]
    arrays = arrays_for(shape, seed)
    g, h = clients
    before_grpc, before_http = read_statistics(clients)
    assert before_grpc == before_http

    grpc_result = described_outputs("grpc", grpc_infer(g, arrays, outputs, request_id))
    http_result = described_outputs("http", http_infer(h, arrays, outputs, request_id))

    assert grpc_result["meta"] == http_result["meta"] == {"model_name": MODEL, "model_version": "1", "id": request_id}
    expected_names = {f"OUT_{dt}" for dt in (outputs or DATATYPES)}
    assert set(grpc_result["outputs"]) == set(http_result["outputs"]) == expected_names
    for name, (datatype, out_shape, array) in grpc_result["outputs"].items():
        h_datatype, h_shape, h_array = http_result["outputs"][name]
        assert (datatype, out_shape) == (h_datatype, h_shape), name
        assert array.shape == h_array.shape == tuple(out_shape), name
        if datatype == "BYTES":
            assert array.tolist() == h_array.tolist(), name
        else:
            assert array.dtype == h_array.dtype, name
            assert array.tobytes() == h_array.tobytes(), name
        dt = name[4:]
        if not (outputs or {}).get(dt):  # an identity output, not a classification
            source = arrays[dt]
            assert array.tolist() == source.tolist() if dt == "BYTES" else array.tobytes() == source.tobytes(), name

    stats_grpc, stats_http = read_statistics(clients)
    assert stats_grpc == stats_http
    (model,) = stats_http["model_stats"]
    (model_before,) = before_http["model_stats"]
    assert (model["name"], model["version"]) == (MODEL, "1")
    inference = model["inference_stats"]
    inference_before = model_before["inference_stats"]
    assert inference["success"]["count"] == inference_before["success"]["count"] + 2
    assert inference["fail"]["count"] == inference_before["fail"]["count"]
    assert model["inference_count"] == model_before["inference_count"] + 2 * shape[0]
    assert model["execution_count"] == model_before["execution_count"] + 2
    for key in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert inference[key]["count"] == inference["success"]["count"], key
    assert sum(b["compute_infer"]["count"] for b in model["batch_stats"]) == model["execution_count"]
    assert model["last_inference"] >= model_before["last_inference"] and model["last_inference"] > 0

    # All models at once agree too.
    g, h = clients
    assert normalise_grpc_stats(g.get_inference_statistics(as_json=False)) == h.get_inference_statistics()
