"""System shared memory as tritonserver 2.51 answers it, over raw HTTP and gRPC: registration (a missing key, past the
segment, zero bytes, a name taken, a second region on a key), status (all, one, unknown), unregistration (unknown,
one, all) and inference naming regions (unknown, past the region, a byte size that does not fit the tensor, an output
region too small, input and output in one region). One sequence of requests per protocol; the answers pytriton gives
are pinned case by case, and (slow, where it is installed) the real tritonserver 2.51 gives the same on the same
repository (tests/repositories/json_kinds), except where a case says why pytriton differs on purpose
(docs/guide/shared-memory.md)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import struct
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests._support.paths import REPOSITORIES
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, asked_of_real_tritonserver
from tests._support.serving import serve

REPOSITORY = REPOSITORIES / "json_kinds"
TIMEOUT_S = 30
INFER = "/v2/models/ident_fp64/infer"
SIZES = {"a": 64, "b": 8, "c": 64}  # the segments each sequence makes: (a) the one most cases use, (b) a small one
MISSING_KEY = "/parity_test_no_such_segment"
ONE_OF = ("Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
          "'shared_memory_region' in 'parameters'. But set")
OUT_SMALL = ("shared memory size specified with the request for output 'Y' (8 bytes) should be at least 16 bytes to "
             "hold the results")
X_DATA = {"name": "X", "datatype": "FP64", "shape": [2], "data": [1, 2]}
OUT_OF_REGION = "Invalid offset + byte size for shared memory region: 'r1'"
UNKNOWN_R = "Unable to find shared memory region: 'nope'"
INVALID_ARGS = "failed to register shared memory region 'r0': invalid args"
MISMATCH = "[request id: <id_unknown>] input byte size mismatch for input 'X' for model 'ident_fp64'. Expected 16, got "


@contextlib.contextmanager
def _segments() -> Iterator[dict[str, str]]:
    """Fresh segments in /dev/shm by letter (their keys), (a) holding the doubles 1.5 and 2.5 at its start; removed
    at the end."""
    keys = {letter: f"/parity_test_{os.getpid()}_{letter}" for letter in SIZES}  # (pytriton_ is reserved)
    try:
        for letter, key in keys.items():
            with open(f"/dev/shm{key}", "wb") as segment:
                segment.write(struct.pack("<2d", 1.5, 2.5) if letter == "a" else b"")
                segment.truncate(SIZES[letter])
        yield keys
    finally:
        for key in keys.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"/dev/shm{key}")


def _named(value: Any, keys: dict[str, str]) -> Any:
    """`value` with each segment's key written as <letter> (keys differ from run to run)."""
    text = json.dumps(value)
    for letter, key in keys.items():
        text = text.replace(key, f"<{letter}>")
    return json.loads(text)


def _http(http_url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    host, port = http_url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request(method, path, None if body is None else json.dumps(body))
        answer = connection.getresponse()
        data = answer.read()
        return answer.status, json.loads(data) if data else ""
    finally:
        connection.close()


def _ref(name: str, region: str, size: int = 16, offset: int = 0, **more: Any) -> dict[str, Any]:
    params = {"shared_memory_region": region, "shared_memory_byte_size": size, **more}
    if offset:
        params["shared_memory_offset"] = offset
    return {"name": name, "parameters": params} | ({"datatype": "FP64", "shape": [2]} if name == "X" else {})


def _http_sequence(http_url: str, keys: dict[str, str]) -> dict[str, Any]:
    def register(name: str, body: Any) -> tuple[int, Any]:
        return _http(http_url, "POST", f"/v2/systemsharedmemory/region/{name}/register", body)

    def infer(inputs: list[dict[str, Any]], outputs: list[dict[str, Any]] | None = None) -> tuple[int, Any]:
        return _http(http_url, "POST", INFER, {"inputs": inputs} | ({"outputs": outputs} if outputs else {}))

    a, b, c = keys["a"], keys["b"], keys["c"]
    out: dict[str, Any] = {
        "register_a_missing_key": register("r0", {"key": MISSING_KEY, "offset": 0, "byte_size": 16}),
        "register_past_the_segment": register("r0", {"key": a, "offset": 60, "byte_size": 16}),
        "register_an_offset_past_the_segment": register("r0", {"key": a, "offset": 100, "byte_size": 1}),
        "register_zero_bytes": register("r0", {"key": a, "offset": 0, "byte_size": 0}),
        "register_no_key": register("r0", {"offset": 0, "byte_size": 16}),
        "register_no_byte_size": register("r0", {"key": a, "offset": 0}),
        "register_a_negative_byte_size": register("r0", {"key": a, "offset": 0, "byte_size": -1}),
        "register_a_text_offset": register("r0", {"key": a, "offset": "0", "byte_size": 16}),
        "register_without_offset": register("rc", {"key": c, "byte_size": 16}),
        "register": register("r1", {"key": a, "offset": 0, "byte_size": 64}),
        "register_a_name_taken": register("r1", {"key": b, "offset": 0, "byte_size": 8}),
        "register_small": register("rs", {"key": b, "offset": 0, "byte_size": 8}),
        "status_all": _http(http_url, "GET", "/v2/systemsharedmemory/status"),
        "status_one": _http(http_url, "GET", "/v2/systemsharedmemory/region/r1/status"),
        "status_unknown": _http(http_url, "GET", "/v2/systemsharedmemory/region/nope/status"),
        "infer_from_a_region": infer([_ref("X", "r1")]),
        "infer_from_an_unknown_region": infer([_ref("X", "nope")]),
        "infer_from_past_the_region": infer([_ref("X", "r1", 16, 56)]),
        "infer_from_an_offset_past_the_region": infer([_ref("X", "r1", 16, 80)]),
        "infer_from_fewer_bytes_than_the_tensor": infer([_ref("X", "r1", 8)]),
        "infer_from_more_bytes_than_the_tensor": infer([_ref("X", "r1", 24)]),
        "infer_from_zero_bytes": infer([_ref("X", "r1", 0)]),
        "infer_from_a_region_without_a_byte_size": infer([_ref("X", "r1") | {"parameters": {
            "shared_memory_region": "r1"}}]),
        "infer_from_a_region_and_data": infer([_ref("X", "r1") | {"data": [1, 2]}]),
        "infer_from_a_region_and_binary": infer([_ref("X", "r1", binary_data_size=16)]),
        "infer_into_a_small_region": infer([X_DATA], [_ref("Y", "rs", 8)]),
        "infer_into_past_the_region": infer([X_DATA], [_ref("Y", "r1", 16, 56)]),
        "infer_into_an_unknown_region": infer([X_DATA], [_ref("Y", "nope")]),
        "infer_into_a_region_as_binary": infer([X_DATA], [_ref("Y", "r1", binary_data=True)]),
        "infer_from_and_into_one_region": infer([_ref("X", "r1")], [_ref("Y", "r1", 16, 16)]),
        "infer_from_and_into_one_place": infer([_ref("X", "r1")], [_ref("Y", "r1", 16, 0)]),
    }
    with open(f"/dev/shm{a}", "rb") as segment:
        out["what_the_region_holds"] = list(struct.unpack("<4d", segment.read(32)))
    out |= {
        "register_a_second_region_on_a_key": register("r2", {"key": a, "offset": 32, "byte_size": 32}),
        "unregister_unknown": _http(http_url, "POST", "/v2/systemsharedmemory/region/nope/unregister"),
        "unregister_one": _http(http_url, "POST", "/v2/systemsharedmemory/region/rc/unregister"),
        "status_after_unregistering_one": _http(http_url, "GET", "/v2/systemsharedmemory/status"),
        "unregister_all": _http(http_url, "POST", "/v2/systemsharedmemory/unregister"),
        "status_after_unregistering_all": _http(http_url, "GET", "/v2/systemsharedmemory/status"),
    }
    return _named(out, keys)


def _rpc(grpc_url: str, method: str, request: Any) -> tuple[str, Any]:
    with grpc.insecure_channel(grpc_url) as channel:
        try:
            answer = getattr(service_pb2_grpc.GRPCInferenceServiceStub(channel), method)(request, timeout=TIMEOUT_S)
        except grpc.RpcError as exc:
            return exc.code().name, exc.details()
    return "OK", json_format.MessageToDict(answer)


def _request(input_region: str | None = None, size: int = 16, offset: int = 0,
             output: tuple[str, int, int] | None = None) -> service_pb2.ModelInferRequest:
    """ident_fp64's request: X from a region (or 1, 2 in the message), Y into `output` (region, size, offset)."""
    request = service_pb2.ModelInferRequest(model_name="ident_fp64")
    tensor = request.inputs.add(name="X", datatype="FP64")
    tensor.shape.extend([2])
    if input_region is None:
        tensor.contents.fp64_contents.extend([1, 2])
    else:
        tensor.parameters["shared_memory_region"].string_param = input_region
        tensor.parameters["shared_memory_byte_size"].int64_param = size
        tensor.parameters["shared_memory_offset"].int64_param = offset
    if output is not None:
        wanted = request.outputs.add(name="Y")
        wanted.parameters["shared_memory_region"].string_param = output[0]
        wanted.parameters["shared_memory_byte_size"].int64_param = output[1]
        wanted.parameters["shared_memory_offset"].int64_param = output[2]
    return request


def _grpc_sequence(grpc_url: str, keys: dict[str, str]) -> dict[str, Any]:
    def register(name: str, key: str, offset: int, byte_size: int) -> tuple[str, Any]:
        return _rpc(grpc_url, "SystemSharedMemoryRegister", service_pb2.SystemSharedMemoryRegisterRequest(
            name=name, key=key, offset=offset, byte_size=byte_size))

    def status(name: str = "") -> tuple[str, Any]:
        return _rpc(grpc_url, "SystemSharedMemoryStatus", service_pb2.SystemSharedMemoryStatusRequest(name=name))

    def unregister(name: str = "") -> tuple[str, Any]:
        return _rpc(grpc_url, "SystemSharedMemoryUnregister",
                    service_pb2.SystemSharedMemoryUnregisterRequest(name=name))

    def infer(request: service_pb2.ModelInferRequest) -> tuple[str, Any]:
        return _rpc(grpc_url, "ModelInfer", request)

    a, b, c = keys["a"], keys["b"], keys["c"]
    out: dict[str, Any] = {
        "register_a_missing_key": register("r0", MISSING_KEY, 0, 16),
        "register_past_the_segment": register("r0", a, 60, 16),
        "register_zero_bytes": register("r0", a, 0, 0),
        "register_without_a_name": register("", c, 0, 16),
        "register": register("r1", a, 0, 64),
        "register_a_name_taken": register("r1", b, 0, 8),
        "register_small": register("rs", b, 0, 8),
        "status_all": status(),
        "status_one": status("r1"),
        "status_unknown": status("nope"),
        "infer_from_a_region": infer(_request("r1")),
        "infer_from_an_unknown_region": infer(_request("nope")),
        "infer_from_past_the_region": infer(_request("r1", 16, 56)),
        "infer_from_fewer_bytes_than_the_tensor": infer(_request("r1", 8)),
        "infer_into_a_small_region": infer(_request(output=("rs", 8, 0))),
        "infer_into_past_the_region": infer(_request(output=("r1", 16, 56))),
        "infer_into_an_unknown_region": infer(_request(output=("nope", 16, 0))),
        "infer_from_and_into_one_region": infer(_request("r1", output=("r1", 16, 16))),
        "register_a_second_region_on_a_key": register("r2", a, 32, 32),
        "unregister_unknown": unregister("nope"),
        "unregister_one": unregister("rs"),
        "status_after_unregistering_one": status(),
        "unregister_all": unregister(),
        "status_after_unregistering_all": status(),
    }
    return _named(out, keys)


def _region(name: str, key: str, byte_size: int, offset: int = 0) -> dict[str, Any]:
    return {"name": name, "key": key, "offset": offset, "byte_size": byte_size}


NON_UNSIGNED = "attempt to access JSON non-unsigned-integer as unsigned-integer"
INTO_A_REGION = {"model_name": "ident_fp64", "model_version": "1",
                 "outputs": [{"name": "Y", "datatype": "FP64", "shape": [2]}]}  # (its data in the region)
ALL_THREE = [_region("r1", "<a>", 64), _region("rc", "<c>", 16), _region("rs", "<b>", 8)]

# What pytriton answers, case by case, over HTTP
HTTP_OURS: dict[str, Any] = {
    "register_a_missing_key": (500, {"error": f"Unable to open shared memory region: '{MISSING_KEY}'"}),
    "register_past_the_segment": (400, {"error": INVALID_ARGS}),
    "register_an_offset_past_the_segment": (400, {"error": INVALID_ARGS}),
    # (Triton's words, its missing space included)
    "register_zero_bytes": (400, {"error": "failed to register shared memory region 'r0': unable to process address "
                                           "spaceInvalid argument"}),
    "register_no_key": (400, {"error": "Shared memory register request has no 'key' field"}),
    "register_no_byte_size": (400, {"error": "Shared memory register request has no 'byte_size' field"}),
    "register_a_negative_byte_size": (400, {"error": f"Unable to parse 'byte_size': {NON_UNSIGNED}"}),
    "register_a_text_offset": (400, {"error": f"Unable to parse 'offset': {NON_UNSIGNED}"}),
    "register_without_offset": (200, ""),
    "register": (200, ""),
    "register_a_name_taken": (400, {"error": "shared memory region 'r1' already in manager"}),
    "register_small": (200, ""),
    "status_all": (200, ALL_THREE),  # (by name, as Triton lists them)
    "status_one": (200, [_region("r1", "<a>", 64)]),
    "status_unknown": (404, {"error": "Unable to find system shared memory region: 'nope'"}),
    "infer_from_a_region": (200, {"model_name": "ident_fp64", "model_version": "1", "outputs": [
        {"name": "Y", "datatype": "FP64", "shape": [2], "data": [1.5, 2.5]}]}),
    "infer_from_an_unknown_region": (404, {"error": UNKNOWN_R}),
    "infer_from_past_the_region": (400, {"error": OUT_OF_REGION}),
    "infer_from_an_offset_past_the_region": (400, {"error": "Invalid offset for shared memory region: 'r1'"}),
    "infer_from_fewer_bytes_than_the_tensor": (400, {"error": MISMATCH + "8"}),
    "infer_from_more_bytes_than_the_tensor": (400, {"error": MISMATCH + "24"}),
    "infer_from_zero_bytes": (400, {"error": "[request id: <id_unknown>] input byte size mismatch for input 'X' for "
                                             "model 'ident_fp64'. Expected 16, got 0"}),
    "infer_from_a_region_without_a_byte_size": (400, {"error": "'shared_memory_byte_size' must be specified along with "
                                                               "'shared_memory_region' parameter for tensor 'X'"}),
    "infer_from_a_region_and_data": (400, {"error": f"{ONE_OF} 'data' 'shared_memory_region'"}),
    "infer_from_a_region_and_binary": (400, {"error": f"{ONE_OF} 'binary_data_size' 'shared_memory_region'"}),
    "infer_into_a_small_region": (500, {"error": OUT_SMALL}),
    "infer_into_past_the_region": (400, {"error": OUT_OF_REGION}),
    "infer_into_an_unknown_region": (404, {"error": UNKNOWN_R}),
    "infer_into_a_region_as_binary": (400, {"error": "Output can't set both 'shared_memory_region' and 'binary_data'"}),
    "infer_from_and_into_one_region": (200, INTO_A_REGION),
    "infer_from_and_into_one_place": (200, INTO_A_REGION),
    "what_the_region_holds": [1.5, 2.5, 1.5, 2.5],
    "register_a_second_region_on_a_key": (200, ""),
    "unregister_unknown": (200, ""),
    "unregister_one": (200, ""),
    "status_after_unregistering_one": (200, [_region("r1", "<a>", 64), _region("r2", "<a>", 32, 32),
                                             _region("rs", "<b>", 8)]),
    "unregister_all": (200, ""),
    "status_after_unregistering_all": (200, []),
}

# Where tritonserver 2.51 answers otherwise, and pytriton keeps its answer on purpose
HTTP_TRITON_DIFFERS: dict[str, Any] = {
    # a client's malformed field is a 400 (docs/guide/clients.md); the reason is Triton's
    "register_a_negative_byte_size": (500, {"error": NON_UNSIGNED}),
    "register_a_text_offset": (500, {"error": NON_UNSIGNED}),
    # Triton 2.51 reuses the descriptor it closed after mapping the key's first region: any second region on a key
    # is refused ("register_a_second_region_on_a_key", checked apart: its words depend on what that descriptor's
    # number names by then, "Invalid shared memory region: '<key>'" or "... invalid args")
    "status_after_unregistering_one": (200, [_region("r1", "<a>", 64), _region("rs", "<b>", 8)]),
    # a missing byte size is named as missing (as Triton's gRPC names it), a zero one checked against the tensor
    "infer_from_zero_bytes": (400, {"error": OUT_OF_REGION}),
    "infer_from_a_region_without_a_byte_size": (400, {"error": OUT_OF_REGION}),
}


def _grpc_region(name: str, key: str, byte_size: int, offset: int = 0) -> dict[str, Any]:
    return {k: v for k, v in (("name", name), ("key", key), ("offset", str(offset)), ("byteSize", str(byte_size)))
            if v not in ("", "0")}


GRPC_OURS: dict[str, Any] = {
    "register_a_missing_key": ("INTERNAL", f"Unable to open shared memory region: '{MISSING_KEY}'"),
    "register_past_the_segment": ("INVALID_ARGUMENT", "failed to register shared memory region 'r0': invalid args"),
    "register_zero_bytes": ("INVALID_ARGUMENT", "failed to register shared memory region 'r0': unable to process "
                                                "address spaceInvalid argument"),
    "register_without_a_name": ("OK", {}),
    "register": ("OK", {}),
    "register_a_name_taken": ("ALREADY_EXISTS", "shared memory region 'r1' already in manager"),
    "register_small": ("OK", {}),
    "status_all": ("OK", {"regions": {"": _grpc_region("", "<c>", 16), "r1": _grpc_region("r1", "<a>", 64),
                                      "rs": _grpc_region("rs", "<b>", 8)}}),
    "status_one": ("OK", {"regions": {"r1": _grpc_region("r1", "<a>", 64)}}),
    "status_unknown": ("NOT_FOUND", "Unable to find system shared memory region: 'nope'"),
    "infer_from_a_region": ("OK", {"modelName": "ident_fp64", "modelVersion": "1", "outputs": [
        {"name": "Y", "datatype": "FP64", "shape": ["2"]}], "rawOutputContents": ["AAAAAAAA+D8AAAAAAAAEQA=="]}),
    "infer_from_an_unknown_region": ("NOT_FOUND", UNKNOWN_R),
    "infer_from_past_the_region": ("INVALID_ARGUMENT", OUT_OF_REGION),
    "infer_from_fewer_bytes_than_the_tensor": ("INVALID_ARGUMENT", "[request id: <id_unknown>] input byte size "
                                                                   "mismatch for input 'X' for model 'ident_fp64'. "
                                                                   "Expected 16, got 8"),
    "infer_into_a_small_region": ("INTERNAL", OUT_SMALL),
    "infer_into_past_the_region": ("INVALID_ARGUMENT", OUT_OF_REGION),
    "infer_into_an_unknown_region": ("NOT_FOUND", UNKNOWN_R),
    "infer_from_and_into_one_region": ("OK", {"modelName": "ident_fp64", "modelVersion": "1", "outputs": [
        {"name": "Y", "datatype": "FP64", "shape": ["2"]}], "rawOutputContents": [""]}),
    "register_a_second_region_on_a_key": ("OK", {}),
    "unregister_unknown": ("OK", {}),
    "unregister_one": ("OK", {}),
    "status_after_unregistering_one": ("OK", {"regions": {
        "": _grpc_region("", "<c>", 16), "r1": _grpc_region("r1", "<a>", 64),
        "r2": _grpc_region("r2", "<a>", 32, 32)}}),
    "unregister_all": ("OK", {}),
    "status_after_unregistering_all": ("OK", {}),
}

GRPC_TRITON_DIFFERS: dict[str, Any] = {
    "status_after_unregistering_one": ("OK", {"regions": {"": _grpc_region("", "<c>", 16),
                                                          "r1": _grpc_region("r1", "<a>", 64)}}),
}


def _plain(value: Any) -> Any:
    """`value` as it reads back from JSON (tuples as lists), as the sequences give their answers."""
    return json.loads(json.dumps(value))


def _both_sequences(http_url: str, grpc_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    with _segments() as keys:
        over_http = _http_sequence(http_url, keys)
    with _segments() as keys:
        over_grpc = _grpc_sequence(grpc_url, keys)
    return over_http, over_grpc


@pytest.fixture(scope="module")
def answers():
    with serve("--model-repository", str(REPOSITORY)) as server:
        yield _both_sequences(server.http_url, server.grpc_url)


@pytest.mark.parametrize("case", HTTP_OURS)
def test_over_http(answers, case):
    assert answers[0][case] == _plain(HTTP_OURS[case])


@pytest.mark.parametrize("case", GRPC_OURS)
def test_over_grpc(answers, case):
    assert answers[1][case] == _plain(GRPC_OURS[case])


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_answers_as_the_tables_say():
    over_http, over_grpc = asked_of_real_tritonserver(REPOSITORY, _both_sequences)
    second = "register_a_second_region_on_a_key"
    assert over_http.pop(second)[0] in (400, 500) and over_grpc.pop(second)[0] in ("INVALID_ARGUMENT", "INTERNAL")
    assert over_http == _plain({k: v for k, v in (HTTP_OURS | HTTP_TRITON_DIFFERS).items() if k != second})
    assert over_grpc == _plain({k: v for k, v in (GRPC_OURS | GRPC_TRITON_DIFFERS).items() if k != second})
