"""Requests whose answers tritonserver 2.51 defines: JSON `data` elements of each kind, outputs asked for twice (raw HTTP
and gRPC), the server's extensions; what pytriton answers, and (slow, where it is installed) the same requests to the
real tritonserver 2.51 on the same repository
(tests/repositories/json_kinds: identity models of Triton's own Python API), compared case by case. Where pytriton
differs on purpose (docs/guide/clients.md: a client's error is 400 where Triton answers 500; an out-of-range integer
is refused where Triton wraps it around), the test says so case by case."""

from __future__ import annotations

import http.client
import json
import queue
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests._support.paths import REPOSITORIES
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, asked_of_real_tritonserver
from tests._support.serving import serve

REPOSITORY = REPOSITORIES / "json_kinds"
TIMEOUT_S = 30
NON_INTEGER = "attempt to access JSON non-signed-integer as signed-integer"
NON_UNSIGNED = "attempt to access JSON non-unsigned-integer as unsigned-integer"
NON_BOOLEAN = "attempt to access JSON non-boolean as boolean"
NON_NUMBER = "attempt to access JSON non-number as double"
NON_STRING = "attempt to access JSON non-string as string"
COUNT = "Unable to parse 'data': Shape does not match true shape of 'data' field"

# case -> (datatype, data, shape or None for the data's length, what Triton 2.51 answers: (status, error or data),
# what pytriton answers where it differs on purpose, else None)
CASES: dict[str, tuple[str, Any, list[int] | None, tuple[int, Any], tuple[int, Any] | None]] = {
    "int32_fraction": ("INT32", [1.9], None, (500, f"Unable to parse 'data': {NON_INTEGER}"),
                       (400, f"Unable to parse 'data' of input 'X': {NON_INTEGER}")),
    "int8_true": ("INT8", [True], None, (500, f"Unable to parse 'data': {NON_INTEGER}"),
                  (400, f"Unable to parse 'data' of input 'X': {NON_INTEGER}")),
    "int64_string": ("INT64", ["1"], None, (500, f"Unable to parse 'data': {NON_INTEGER}"),
                     (400, f"Unable to parse 'data' of input 'X': {NON_INTEGER}")),
    "uint8_negative": ("UINT8", [-1], None, (500, f"Unable to parse 'data': {NON_UNSIGNED}"),
                       (400, f"Unable to parse 'data' of input 'X': {NON_UNSIGNED}")),
    "bool_one": ("BOOL", [1], None, (500, f"Unable to parse 'data': {NON_BOOLEAN}"),
                 (400, f"Unable to parse 'data' of input 'X': {NON_BOOLEAN}")),
    "bool_string_false": ("BOOL", ["false"], None, (500, f"Unable to parse 'data': {NON_BOOLEAN}"),
                          (400, f"Unable to parse 'data' of input 'X': {NON_BOOLEAN}")),
    "fp64_true": ("FP64", [True], None, (500, f"Unable to parse 'data': {NON_NUMBER}"),
                  (400, f"Unable to parse 'data' of input 'X': {NON_NUMBER}")),
    "fp64_null": ("FP64", [None], None, (500, f"Unable to parse 'data': {NON_NUMBER}"),
                  (400, f"Unable to parse 'data' of input 'X': {NON_NUMBER}")),
    "fp64_scalar": ("FP64", 5, [1], (500, "Unable to parse 'data': attempt to access JSON non-array as array"),
                    (400, "Unable to parse 'data' of input 'X': attempt to access JSON non-array as array")),
    "bytes_number": ("BYTES", [1], None, (500, f"Unable to parse JSON bytes array: {NON_STRING}"),
                     (400, "Unable to parse 'data' of input 'X': attempt to access JSON non-string as string")),
    "int8_wraps": ("INT8", [300], None, (200, [44]),
                   (400, "Unable to parse 'data' of input 'X': 300 is out of the range of INT8 [-128, 127]")),
    "uint8_wraps": ("UINT8", [256], None, (200, [0]),
                    (400, "Unable to parse 'data' of input 'X': 256 is out of the range of UINT8 [0, 255]")),
    "fewer": ("FP64", [1, 2, 3], [4], (500, COUNT), None),
    "more": ("FP64", [1, 2, 3, 4, 5], [4], (500, COUNT), None),
    "past_the_count_before_a_bad_one": ("INT32", [1, 2, 3, 4, "x"], [4], (500, COUNT), None),
    "nested": ("FP64", [[1, 2], [3, 4]], [4], (200, [1.0, 2.0, 3.0, 4.0]), None),
    "int64_edges": ("INT64", [-2**63, 2**63 - 1], None, (200, [-2**63, 2**63 - 1]), None),
    "uint64_top": ("UINT64", [2**64 - 1], None, (200, [2**64 - 1]), None),
    "bool_values": ("BOOL", [True, False], None, (200, [True, False]), None),
    "fp64_integers": ("FP64", [1, -2], None, (200, [1.0, -2.0]), None),
    "bytes_nested": ("BYTES", [["ab"], ["cd"]], [2], (200, ["ab", "cd"]), None),
}


def _post(http_url: str, model: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    host, port = http_url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request("POST", f"/v2/models/{model}/infer", json.dumps(body), {"Content-Type": "application/json"})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def _answer(http_url: str, case: str) -> tuple[int, Any]:
    datatype, data, shape, _, _ = CASES[case]
    tensor = {"name": "X", "datatype": datatype, "shape": shape or [len(data)], "data": data}
    status, body = _post(http_url, f"ident_{datatype.lower()}", {"inputs": [tensor]})
    return status, body["outputs"][0]["data"] if status == 200 else body["error"]


def _repeated_outputs(http_url: str, grpc_url: str) -> dict[str, Any]:
    """An output asked for twice: over HTTP in JSON then binary form (and the other way round), and over gRPC."""
    out: dict[str, Any] = {}
    x = {"name": "X", "datatype": "FP64", "shape": [2], "data": [1, 2]}
    for label, forms in (("json_first", [{}, {"binary_data": True}]), ("binary_first", [{"binary_data": True}, {}])):
        status, body = _post_raw(http_url, {"inputs": [x], "outputs": [{"name": "Y", "parameters": p} for p in forms]})
        out[label] = status, body
    request = service_pb2.ModelInferRequest(model_name="ident_fp64")
    tensor = request.inputs.add(name="X", datatype="FP64")
    tensor.shape.extend([2])
    tensor.contents.fp64_contents.extend([1, 2])
    request.outputs.add(name="Y")
    request.outputs.add(name="Y")
    with grpc.insecure_channel(grpc_url) as channel:
        answer = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=TIMEOUT_S)
    out["grpc"] = [(o.name, list(o.shape)) for o in answer.outputs], [bytes(r) for r in answer.raw_output_contents]
    return out


def _post_raw(http_url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    host, port = http_url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request("POST", "/v2/models/ident_fp64/infer", json.dumps(body), {"Content-Type": "application/json"})
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPOSITORY)) as s:
        yield s


@pytest.mark.parametrize("case", CASES)
def test_json_data_of_each_kind(server, case):
    _, _, _, theirs, ours = CASES[case]
    assert _answer(server.http_url, case) == (ours or theirs)


def test_an_output_asked_for_twice_is_answered_once_in_the_first_ones_form(server):
    answers = _repeated_outputs(server.http_url, server.grpc_url)
    status, body = answers["json_first"]
    assert status == 200 and json.loads(body)["outputs"] == [
        {"name": "Y", "datatype": "FP64", "shape": [2], "data": [1.0, 2.0]}]
    status, body = answers["binary_first"]
    header = json.loads(body[: body.index(b"}]}") + 3])
    assert status == 200 and header["outputs"] == [
        {"name": "Y", "datatype": "FP64", "shape": [2], "parameters": {"binary_data_size": 16}}]
    assert answers["grpc"] == ([("Y", [2])], [bytes.fromhex("000000000000f03f0000000000000040")])


# GET /v2's extensions, as tritonserver 2.51 lists them (its version differs: ours names the protocol's release)
EXTENSIONS = ["classification", "sequence", "model_repository", "model_repository(unload_dependents)",
              "schedule_policy", "model_configuration", "system_shared_memory", "cuda_shared_memory",
              "binary_tensor_data", "parameters", "statistics", "trace", "logging"]


def _extensions(http_url: str, grpc_url: str) -> tuple[list[str], list[str]]:
    host, port = http_url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request("GET", "/v2")
        over_http = json.loads(connection.getresponse().read())["extensions"]
    finally:
        connection.close()
    with grpc.insecure_channel(grpc_url) as channel:
        answer = service_pb2_grpc.GRPCInferenceServiceStub(channel).ServerMetadata(service_pb2.ServerMetadataRequest(),
                                                                                   timeout=TIMEOUT_S)
    return over_http, list(answer.extensions)


MODELS = sorted(p.name for p in REPOSITORY.iterdir() if p.is_dir())


def _get(http_url: str, path: str) -> dict[str, Any]:
    host, port = http_url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request("GET", path)
        return dict(json.loads(connection.getresponse().read()))
    finally:
        connection.close()


def _config(http_url: str, model: str) -> dict[str, Any]:
    return _get(http_url, f"/v2/models/{model}/config")


def test_a_config_without_a_transaction_policy_shows_none(server):
    """As tritonserver 2.51 shows it (a decoupled model's config shows `{"decoupled": true}`)."""
    assert "model_transaction_policy" not in _config(server.http_url, "ident_fp64")


def _non_finite_answer(http_url: str) -> tuple[int, bytes]:
    """NaN and the infinities (a binary input) answered in JSON."""
    data = np.array([np.nan, np.inf, -np.inf, 1.5], dtype=np.float64).tobytes()
    header = json.dumps({"inputs": [{"name": "X", "shape": [4], "datatype": "FP64",
                                     "parameters": {"binary_data_size": len(data)}}]}).encode()
    host, port = http_url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request("POST", "/v2/models/ident_fp64/infer", header + data,
                           {"Inference-Header-Content-Length": str(len(header))})
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_nan_and_the_infinities_come_back_through_json(server):
    """Written as tritonserver writes them (NaN, Infinity, -Infinity), which tritonclient reads back; JSON's null
    would read as NaN, an infinity lost."""
    status, body = _non_finite_answer(server.http_url)
    assert status == 200 and b'"data":[NaN,Infinity,-Infinity,1.5]' in body
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=TIMEOUT_S)
    try:
        tensor = httpclient.InferInput("X", [4], "FP64")
        tensor.set_data_from_numpy(np.array([np.nan, np.inf, -np.inf, 1.5]), binary_data=True)
        result = client.infer("ident_fp64", [tensor], outputs=[httpclient.InferRequestedOutput("Y", binary_data=False)])
        np.testing.assert_array_equal(result.as_numpy("Y"), [np.nan, np.inf, -np.inf, 1.5])
    finally:
        client.close()


# pb_probe's cases -> what REPORT says on tritonserver 2.51, or (on tritonserver 2.51, here) where pytriton differs on
# purpose (tests/repositories/json_kinds/pb_probe/1/model.py)
NOT_READY = "Model {0} - Error when running inference: Failed for execute the inference request. Model '{0}' is not ready."
BLS_ERROR = "Model ident_fp64 - Error when running inference: "
PB_CASES: dict[str, str | tuple[str, str]] = {
    "requested": "['EXTRA', 'REPORT']",  # (the client named none: all of them, as Triton fills them in)
    "parameters": """'{"case":"parameters"}'""",  # (compact)
    "dlpack": "[1.0, 2.0]",  # (an input is read-only here: to_dlpack() exports a copy)
    "bls_ok": "['Y']",
    "bls_unknown_model": repr((1, NOT_READY.format("no_such_model"))),  # (INTERNAL, whatever the callee's error)
    "bls_unknown_version": repr((1, NOT_READY.format("ident_fp64"))),
    "bls_unknown_input": repr((1, BLS_ERROR + "unexpected inference input 'Q' for model 'ident_fp64'")),
    "bls_unknown_output": repr((1, BLS_ERROR + "unexpected inference output 'Z' for model 'ident_fp64'")),
    # a decoupled callee's error response, then more, then the final flag: tritonserver 2.51 drops the error
    # response from what its caller iterates over (the caller never hears of it); it is handed on here
    "bls_decoupled_error": (repr([("response", "before"), ("response", "after"), ("response", None)]),
                            repr([("response", "before"),
                                  ("error", "Model dec_probe - Error when running inference: boom"),
                                  ("response", "after"), ("response", None)])),
    "bls_wrong_datatype": repr((1, BLS_ERROR + "[request id: <id_unknown>] inference input 'X' data-type is 'INT32', "
                                               "but model 'ident_fp64' expects 'FP64'")),
}


def _pb_report(http_url: str, case: str) -> str:
    body = {"inputs": [{"name": "X", "shape": [2], "datatype": "FP64", "data": [1, 2]}], "parameters": {"case": case},
            "outputs": []}
    status, answer = _post(http_url, "pb_probe", body)
    assert status == 200, answer
    return str(answer["outputs"][0]["data"][0])


def _pb_expected(case: str, server_side: int) -> str:
    """What pb_probe's `case` reports on tritonserver 2.51 (0) or here (1)."""
    expected = PB_CASES[case]
    return expected if isinstance(expected, str) else expected[server_side]


@pytest.mark.parametrize("case", PB_CASES)
def test_pb_utils_calls_give_what_tritons_give(server, case):
    assert _pb_report(server.http_url, case) == _pb_expected(case, 1)


# dec_probe's cases -> what a gRPC stream client receives from tritonserver 2.51: ("error", message) or
# ("response", OUT or None, the final flag)
DEC_CASES = {
    # an error response does not end the stream: what follows comes, the final flag too
    "error_then_final": [("response", "before", False), ("error", "boom"), ("response", "after", False),
                         ("response", None, True)],
    "error_with_final": [("error", "boom")],
    "unknown_flag": [("response", "TritonModelException: Unable to send response. Unsupported flag provided.", True)],
    "send_after_final": [("response", "a", True)],
    "list_after_final": [("response", "x", True)],  # (execute's error comes after the final response: logged)
    "raise_after_final": [("response", None, True)],  # (the error is logged: test_an_error_after_the_final_...)
    "list_returned": [("error", "Failed to process the request(s) for model 'dec_probe_0', message: Python model "
                                "'dec_probe_0' is using the decoupled mode and the execute function must return "
                                "None.")],
}


def _dec_stream(grpc_url: str, case: str) -> list[tuple[Any, ...]]:
    answers: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
    client = grpcclient.InferenceServerClient(grpc_url)
    try:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        tensor = grpcclient.InferInput("CASE", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([case.encode()], dtype=np.object_))
        client.async_stream_infer("dec_probe", [tensor], enable_empty_final_response=True)
        got: list[tuple[Any, ...]] = []
        while True:
            result, error = answers.get(timeout=TIMEOUT_S)
            if error is not None:
                got.append(("error", error.message()))
                if case in ("error_with_final", "list_returned"):  # (the final flag rides on the error)
                    return got
                continue
            final = result.get_response().parameters["triton_final_response"].bool_param
            out = result.as_numpy("OUT")
            got.append(("response", None if out is None else out[0].decode(), final))
            if final:
                return got
    finally:
        client.stop_stream()
        client.close()


@pytest.mark.parametrize("case", DEC_CASES)
def test_a_decoupled_models_sender_as_tritons(server, case):
    assert _dec_stream(server.grpc_url, case) == DEC_CASES[case]


def test_an_error_after_the_final_responses_is_logged_in_tritons_words(server):
    """tritonserver 2.51 logs `Failed to process the request(s) for model 'dec_probe_0', message: ValueError: raised
    after the final response` and the model file's lines (Triton's QA async_execute/concurrency_test.py looks for the
    exception's type and message in the log)."""
    assert _dec_stream(server.grpc_url, "raise_after_final") == DEC_CASES["raise_after_final"]
    assert server.wait_for_log("Failed to process the request(s) for model 'dec_probe_0', message: ValueError: raised "
                               "after the final response"), server.log[-3000:]


def test_the_server_lists_the_extensions_it_has(server):
    assert _extensions(server.http_url, server.grpc_url) == (EXTENSIONS, EXTENSIONS)


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_answers_as_the_table_says(server):
    """Every case's Triton column, the repeated outputs, the extensions, a NaN answered in JSON, pb_probe's reports,
    dec_probe's streams, and every model's config and metadata, as tritonserver 2.51 answers them."""
    def ask(http_url: str, grpc_url: str) -> dict[str, Any]:
        return {
            "theirs": {case: _answer(http_url, case) for case in CASES},
            "repeated": _repeated_outputs(http_url, grpc_url),
            "extensions": _extensions(http_url, grpc_url),
            "non_finite": _non_finite_answer(http_url),
            "pb_reports": {case: _pb_report(http_url, case) for case in PB_CASES},
            "streams": {case: _dec_stream(grpc_url, case) for case in DEC_CASES},
            "configs": {model: (_config(http_url, model), _get(http_url, f"/v2/models/{model}")) for model in MODELS},
        }

    got = asked_of_real_tritonserver(REPOSITORY, ask)
    theirs, repeated, extensions, non_finite, pb_reports, streams, configs = got.values()
    assert theirs == {case: CASES[case][3] for case in CASES}
    assert repeated == _repeated_outputs(server.http_url, server.grpc_url)
    assert extensions == (EXTENSIONS, EXTENSIONS)
    assert non_finite == _non_finite_answer(server.http_url)
    assert pb_reports == {case: _pb_expected(case, 0) for case in PB_CASES}
    assert streams == DEC_CASES
    for model in MODELS:
        assert configs[model] == (_config(server.http_url, model), _get(server.http_url, f"/v2/models/{model}")), model
