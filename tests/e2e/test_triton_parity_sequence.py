"""Sequence batcher request checks as tritonserver 2.51 answers them, over raw HTTP and gRPC: a correlation id missing,
0, empty, negative, too large, of the wrong JSON type, a string id where the model's CORRID control is UINT64 and an
integer one where it is a string, START and END of the wrong type, a sequence continued without its start. One
sequence of requests; the answers pytriton gives are pinned case by case, and (slow, where it is installed) the real
tritonserver 2.51 gives the same on the same repository (tests/repositories/triton_parity: `seq_u64` and `seq_str`,
Y = X with START and CORRID controls, UINT64 and string), except where a case says why pytriton differs on purpose
(docs/guide/scheduling.md)."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from tests._support.paths import REPOSITORIES
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, asked_of_real_tritonserver
from tests._support.serving import serve
from tests._support.triton_parity_calls import ANSWERED, grpc_infer

REPOSITORY = REPOSITORIES / "triton_parity"
TIMEOUT_S = 30
ARGS = ("--model-control-mode", "explicit", "--load-model", "seq_u64", "--load-model", "seq_str")
X = [{"name": "X", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]
NO_ID = "inference request to model '{}' must specify a non-zero or non-empty correlation ID"
NO_START = "inference request for sequence {} to model 'seq_u64' must specify the START flag on the first request of " \
           "the sequence"
BAD_ID = "Unable to parse 'sequence_id': attempt to access JSON non-string as string"
BAD_START = "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean"
BAD_END = "Unable to parse 'sequence_end': attempt to access JSON non-boolean as boolean"
U64_GOT_STRING = "sequence batching control 'CORRID' data-type is 'BYTES', but model 'seq_u64' expects 'UINT64'"
STR_GOT_U64 = "sequence batching control 'CORRID' data-type is 'UINT64', but model 'seq_str' expects 'BYTES'"
# tritonserver 2.51's answer to every request with a correlation id to a model whose CORRID control is a string
TRITON_STRING_CORRID = "unexpected number of string elements 2 for inference input 'CORRID', expecting 1"


def _http(http_url: str, model: str, **parameters: Any) -> tuple[int, str]:
    host, port = http_url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request("POST", f"/v2/models/{model}/infer", json.dumps({"inputs": X, "parameters": parameters}))
        answer = connection.getresponse()
        body = json.loads(answer.read())
    finally:
        connection.close()
    return answer.status, ANSWERED if answer.status == 200 and body["outputs"][0]["data"] == [1.0] else body["error"]


def _grpc(grpc_url: str, model: str, **parameters: tuple[str, Any]) -> tuple[str, str]:
    return grpc_infer(grpc_url, model, parameters)


def _sequence(http_url: str, grpc_url: str) -> dict[str, Any]:
    start, end = ("bool_param", True), ("bool_param", True)
    return json.loads(json.dumps({
        "no_id": _http(http_url, "seq_u64"),
        "id_0": _http(http_url, "seq_u64", sequence_id=0, sequence_start=True),
        "id_empty": _http(http_url, "seq_u64", sequence_id="", sequence_start=True),
        "start_without_an_id": _http(http_url, "seq_u64", sequence_start=True),
        "start": _http(http_url, "seq_u64", sequence_id=5, sequence_start=True),
        "continue": _http(http_url, "seq_u64", sequence_id=5),
        "end": _http(http_url, "seq_u64", sequence_id=5, sequence_end=True),
        "after_the_end": _http(http_url, "seq_u64", sequence_id=5),
        "never_started": _http(http_url, "seq_u64", sequence_id=99),
        "start_and_end_at_once": _http(http_url, "seq_u64", sequence_id=7, sequence_start=True, sequence_end=True),
        "largest_id": _http(http_url, "seq_u64", sequence_id=2**64 - 1, sequence_start=True, sequence_end=True),
        "id_too_large": _http(http_url, "seq_u64", sequence_id=2**64, sequence_start=True),
        "id_negative": _http(http_url, "seq_u64", sequence_id=-1, sequence_start=True),
        "id_a_fraction": _http(http_url, "seq_u64", sequence_id=1.5, sequence_start=True),
        "id_true": _http(http_url, "seq_u64", sequence_id=True, sequence_start=True),
        "start_a_string": _http(http_url, "seq_u64", sequence_id=6, sequence_start="yes"),
        "start_a_number": _http(http_url, "seq_u64", sequence_id=6, sequence_start=1),
        "end_a_number": _http(http_url, "seq_u64", sequence_id=6, sequence_start=True, sequence_end=1),
        "string_id_for_a_uint64_corrid": _http(http_url, "seq_u64", sequence_id="abc", sequence_start=True),
        "string_id_for_a_string_corrid": _http(http_url, "seq_str", sequence_id="abc", sequence_start=True,
                                               sequence_end=True),
        "integer_id_for_a_string_corrid": _http(http_url, "seq_str", sequence_id=5, sequence_start=True),
        "no_id_for_a_string_corrid": _http(http_url, "seq_str"),
        "grpc_no_id": _grpc(grpc_url, "seq_u64", sequence_start=start),
        "grpc_id": _grpc(grpc_url, "seq_u64", sequence_id=("int64_param", 8), sequence_start=start, sequence_end=end),
        "grpc_id_negative": _grpc(grpc_url, "seq_u64", sequence_id=("int64_param", -3), sequence_start=start,
                                  sequence_end=end),
        "grpc_id_a_uint64_param": _grpc(grpc_url, "seq_u64", sequence_id=("uint64_param", 9), sequence_start=start),
        "grpc_id_a_bool": _grpc(grpc_url, "seq_u64", sequence_id=("bool_param", True), sequence_start=start),
        "grpc_start_a_number": _grpc(grpc_url, "seq_u64", sequence_id=("int64_param", 10),
                                     sequence_start=("int64_param", 1)),
        "grpc_never_started": _grpc(grpc_url, "seq_u64", sequence_id=("int64_param", 98)),
        "grpc_string_id_for_a_uint64_corrid": _grpc(grpc_url, "seq_u64", sequence_id=("string_param", "xyz"),
                                                    sequence_start=start, sequence_end=end),
        "grpc_string_id_for_a_string_corrid": _grpc(grpc_url, "seq_str", sequence_id=("string_param", "xyz"),
                                                    sequence_start=start, sequence_end=end),
    }))


GRPC_BAD_ID = "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."
OURS: dict[str, Any] = {
    "no_id": (400, NO_ID.format("seq_u64")),
    "id_0": (400, NO_ID.format("seq_u64")),
    "id_empty": (400, NO_ID.format("seq_u64")),
    "start_without_an_id": (400, NO_ID.format("seq_u64")),
    "start": (200, ANSWERED),
    "continue": (200, ANSWERED),
    "end": (200, ANSWERED),
    "after_the_end": (400, NO_START.format(5)),
    "never_started": (400, NO_START.format(99)),
    "start_and_end_at_once": (200, ANSWERED),
    "largest_id": (200, ANSWERED),
    # a malformed parameter is a 400 with Triton's reason (docs/guide/clients.md)
    "id_too_large": (400, BAD_ID),
    "id_negative": (400, BAD_ID),
    "id_a_fraction": (400, BAD_ID),
    "id_true": (400, BAD_ID),
    "start_a_string": (400, BAD_START),
    "start_a_number": (400, BAD_START),
    "end_a_number": (400, BAD_END),
    "string_id_for_a_uint64_corrid": (400, U64_GOT_STRING),
    "string_id_for_a_string_corrid": (200, ANSWERED),
    "integer_id_for_a_string_corrid": (400, STR_GOT_U64),
    "no_id_for_a_string_corrid": (400, NO_ID.format("seq_str")),
    "grpc_no_id": ("INVALID_ARGUMENT", NO_ID.format("seq_u64")),
    "grpc_id": ("OK", ANSWERED),
    "grpc_id_negative": ("OK", ANSWERED),  # (as Triton: an int64_param is taken as its unsigned 64 bits)
    "grpc_id_a_uint64_param": ("INVALID_ARGUMENT", GRPC_BAD_ID),
    "grpc_id_a_bool": ("INVALID_ARGUMENT", GRPC_BAD_ID),
    "grpc_start_a_number": ("INVALID_ARGUMENT", "invalid value type for 'sequence_start' parameter, expected "
                                                "bool_param."),
    "grpc_never_started": ("INVALID_ARGUMENT", NO_START.format(98)),
    "grpc_string_id_for_a_uint64_corrid": ("INVALID_ARGUMENT", U64_GOT_STRING),
    "grpc_string_id_for_a_string_corrid": ("OK", ANSWERED),
}

# Where tritonserver 2.51 answers otherwise, and pytriton keeps its answer on purpose
TRITON_DIFFERS: dict[str, Any] = {
    # Triton's answer to a malformed parameter is a 500
    **{case: (500, OURS[case][1]) for case in ("id_too_large", "id_negative", "id_a_fraction", "id_true",
                                               "start_a_string", "start_a_number", "end_a_number")},
    # Triton serves a string id to a model whose CORRID control is UINT64 (the model is not given the id)
    "string_id_for_a_uint64_corrid": (200, ANSWERED),
    "grpc_string_id_for_a_uint64_corrid": ("OK", ANSWERED),
    # Triton 2.51 cannot serve a model whose CORRID control is a string: every request with an id fails
    "string_id_for_a_string_corrid": (400, TRITON_STRING_CORRID),
    "integer_id_for_a_string_corrid": (400, TRITON_STRING_CORRID),
    "grpc_string_id_for_a_string_corrid": ("INVALID_ARGUMENT", TRITON_STRING_CORRID),
}


@pytest.fixture(scope="module")
def answers():
    with serve("--model-repository", str(REPOSITORY), *ARGS) as server:
        return _sequence(server.http_url, server.grpc_url)


@pytest.mark.parametrize("case", OURS)
def test_sequence_requests(answers, case):
    assert answers[case] == json.loads(json.dumps(OURS[case]))


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_answers_as_the_table_says():
    theirs = asked_of_real_tritonserver(REPOSITORY, _sequence, ARGS)
    assert theirs == json.loads(json.dumps(OURS | TRITON_DIFFERS))
