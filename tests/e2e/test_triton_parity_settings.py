"""Trace and log settings as tritonserver 2.51 answers them, over raw HTTP and gRPC: valid updates, invalid values and
types, unknown keys, clearing a setting (null / an empty value), the settings shown after each, on a server without a
trace file and on one with. One sequence of requests per server; the answers pytriton gives are pinned case by case,
and (slow, where it is installed) the real tritonserver 2.51 gives the same on the same repository
(tests/repositories/json_kinds), except where a case says why pytriton differs on purpose (docs/guide/tracing.md)."""

from __future__ import annotations

import http.client
import json
import tempfile
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests._support.paths import REPOSITORIES
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, real_tritonserver
from tests._support.serving import serve

REPOSITORY = REPOSITORIES / "json_kinds"
TIMEOUT_S = 30
TRACE = "/v2/trace/setting"
MODEL_TRACE = "/v2/models/ident_fp64/trace/setting"
LOGGING = "/v2/logging"
NO_FILE = "Attempting to set invalid trace setting :trace file name is not given"
NON_ARRAY = "attempt to access JSON non-array as array"
NON_STRING = "attempt to access JSON non-string as string"
NON_UNSIGNED = "attempt to access JSON non-unsigned-integer as unsigned-integer"
NON_BOOLEAN = "attempt to access JSON non-boolean as boolean"


def _http(http_url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    host, port = http_url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request(method, path, None if body is None else json.dumps(body))
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def _rpc(grpc_url: str, method: str, request: Any) -> tuple[str, Any]:
    with grpc.insecure_channel(grpc_url) as channel:
        try:
            answer = getattr(service_pb2_grpc.GRPCInferenceServiceStub(channel), method)(request, timeout=TIMEOUT_S)
        except grpc.RpcError as exc:
            return exc.code().name, exc.details()
    return "OK", json_format.MessageToDict(answer)["settings"]


def _trace_rpc(grpc_url: str, model: str = "", **settings: list[str] | None) -> tuple[str, Any]:
    """TraceSetting with `settings` (None: an empty value, which clears)."""
    request = service_pb2.TraceSettingRequest(model_name=model)
    for key, values in settings.items():
        request.settings[key].CopyFrom(service_pb2.TraceSettingRequest.SettingValue(value=values or []))
    status, answer = _rpc(grpc_url, "TraceSetting", request)
    if status == "OK":  # (the HTTP form: a list for the level, else the one value)
        answer = {k: v.get("value", []) if k == "trace_level" else v["value"][0] for k, v in answer.items()}
    return status, answer


def _log_rpc(grpc_url: str, **settings: tuple[str, Any] | None) -> tuple[str, Any]:
    """LogSettings with `settings` by (parameter kind, value) (None: a value with no parameter set)."""
    request = service_pb2.LogSettingsRequest()
    for key, setting in settings.items():
        value = request.settings[key]
        if setting is None:
            value.CopyFrom(service_pb2.LogSettingsRequest.SettingValue())
        else:
            setattr(value, setting[0], setting[1])
    status, answer = _rpc(grpc_url, "LogSettings", request)
    if status == "OK":
        answer = {k: next(iter(v.values())) for k, v in answer.items()}
    return status, answer


def _without_a_file(http_url: str, grpc_url: str) -> dict[str, Any]:
    def post(path: str, body: Any) -> tuple[int, Any]:
        return _http(http_url, "POST", path, body)

    return {
        "get": _http(http_url, "GET", TRACE),
        "level_without_a_file": post(TRACE, {"trace_level": ["TIMESTAMPS"]}),
        "model_level_without_a_file": post(MODEL_TRACE, {"trace_level": ["TIMESTAMPS"]}),
        "level_off": post(TRACE, {"trace_level": ["OFF"]}),
        "level_off_and_another": post(TRACE, {"trace_level": ["OFF", "TIMESTAMPS"]}),
        "level_empty": post(TRACE, {"trace_level": []}),
        "level_unknown": post(TRACE, {"trace_level": ["NOPE"]}),
        "level_in_lower_case": post(TRACE, {"trace_level": ["timestamps"]}),
        "level_a_string": post(TRACE, {"trace_level": "OFF"}),
        "level_a_number": post(TRACE, {"trace_level": [1]}),
        "rate": post(TRACE, {"trace_rate": "5"}),
        "rate_a_number": post(TRACE, {"trace_rate": 6}),
        "rate_not_a_number": post(TRACE, {"trace_rate": "x"}),
        "rate_negative": post(TRACE, {"trace_rate": "-1"}),
        "count": post(TRACE, {"trace_count": "3"}),
        "count_below_minus_one": post(TRACE, {"trace_count": "-2"}),
        "log_frequency_not_a_number": post(TRACE, {"log_frequency": "y"}),
        "file": post(TRACE, {"trace_file": "/tmp/parity_trace.json"}),
        "mode": post(TRACE, {"trace_mode": "opentelemetry"}),
        "unknown_key": post(TRACE, {"nope": "1"}),
        "not_an_object": post(TRACE, [1]),
        "model_rate": post(MODEL_TRACE, {"trace_rate": "3"}),
        "global_after_the_models": _http(http_url, "GET", TRACE),
        "model_clears_its_rate": post(MODEL_TRACE, {"trace_rate": None}),
        "clear_rate": post(TRACE, {"trace_rate": None}),
        "clear_count": post(TRACE, {"trace_count": None}),
        "unknown_model": _http(http_url, "GET", "/v2/models/nope/trace/setting"),
        "unknown_model_update": post("/v2/models/nope/trace/setting", {"trace_rate": "3"}),
        "log_get": _http(http_url, "GET", LOGGING),
        "log_verbose": post(LOGGING, {"log_verbose_level": 1}),
        "log_verbose_a_string": post(LOGGING, {"log_verbose_level": "1"}),
        "log_verbose_negative": post(LOGGING, {"log_verbose_level": -1}),
        "log_verbose_true": post(LOGGING, {"log_verbose_level": True}),
        "log_info": post(LOGGING, {"log_info": False}),
        "log_info_a_string": post(LOGGING, {"log_info": "false"}),
        "log_info_a_number": post(LOGGING, {"log_info": 0}),
        "log_format": post(LOGGING, {"log_format": "ISO8601"}),
        "log_format_unknown": post(LOGGING, {"log_format": "nope"}),
        "log_format_a_number": post(LOGGING, {"log_format": 1}),
        "log_file": post(LOGGING, {"log_file": "/tmp/parity_log.txt"}),
        "log_unknown_key": post(LOGGING, {"nope": 1}),
        "log_nulls": post(LOGGING, {"log_verbose_level": None, "log_info": None}),
        "log_reset": post(LOGGING, {"log_verbose_level": 0, "log_info": True, "log_format": "default"}),
        "grpc_get": _trace_rpc(grpc_url),
        "grpc_level_without_a_file": _trace_rpc(grpc_url, trace_level=["TIMESTAMPS"]),
        "grpc_level_unknown": _trace_rpc(grpc_url, trace_level=["NOPE"]),
        "grpc_rate_twice": _trace_rpc(grpc_url, trace_rate=["1", "2"]),
        "grpc_rate_not_a_number": _trace_rpc(grpc_url, trace_rate=["x"]),
        "grpc_rate": _trace_rpc(grpc_url, trace_rate=["7"]),
        "grpc_count_below_minus_one": _trace_rpc(grpc_url, trace_count=["-2"]),
        "grpc_unknown_key": _trace_rpc(grpc_url, nope=["1"]),
        "grpc_file": _trace_rpc(grpc_url, trace_file=["/tmp/parity_trace.json"]),
        "grpc_mode": _trace_rpc(grpc_url, trace_mode=["opentelemetry"]),
        "grpc_model_rate": _trace_rpc(grpc_url, "ident_fp64", trace_rate=["9"]),
        "grpc_model_clears_its_rate": _trace_rpc(grpc_url, "ident_fp64", trace_rate=None),
        "grpc_clear_rate": _trace_rpc(grpc_url, trace_rate=None),
        "grpc_unknown_model": _trace_rpc(grpc_url, "nope"),
        "grpc_log_get": _log_rpc(grpc_url),
        "grpc_log_verbose": _log_rpc(grpc_url, log_verbose_level=("uint32_param", 2)),
        "grpc_log_verbose_a_string": _log_rpc(grpc_url, log_verbose_level=("string_param", "2")),
        "grpc_log_verbose_unset": _log_rpc(grpc_url, log_verbose_level=None),
        "grpc_log_info_a_number": _log_rpc(grpc_url, log_info=("uint32_param", 1)),
        "grpc_log_info_unset": _log_rpc(grpc_url, log_info=None),
        "grpc_log_format_unknown": _log_rpc(grpc_url, log_format=("string_param", "nope")),
        "grpc_log_format_a_bool": _log_rpc(grpc_url, log_format=("bool_param", True)),
        "grpc_log_unknown_key": _log_rpc(grpc_url, nope=("bool_param", True)),
        "grpc_log_file": _log_rpc(grpc_url, log_file=("string_param", "/tmp/parity_log.txt")),
        "grpc_log_reset": _log_rpc(grpc_url, log_verbose_level=("uint32_param", 0)),
    }


def _with_a_file(http_url: str, grpc_url: str, trace_file: str) -> dict[str, Any]:
    def post(path: str, body: Any) -> tuple[int, Any]:
        return _http(http_url, "POST", path, body)

    out = {
        "get": _http(http_url, "GET", TRACE),
        "level": post(TRACE, {"trace_level": ["TIMESTAMPS"], "trace_rate": "1"}),
        "model_levels": post(MODEL_TRACE, {"trace_level": ["TIMESTAMPS", "TENSORS"]}),
        "model_clears_its_level": post(MODEL_TRACE, {"trace_level": None}),
        "clear_level": post(TRACE, {"trace_level": None}),
        "level_unknown": post(TRACE, {"trace_level": ["NOPE"]}),
        "grpc_level": _trace_rpc(grpc_url, trace_level=["TENSORS"]),
        "grpc_clear_level": _trace_rpc(grpc_url, trace_level=None),
        "grpc_clear_rate": _trace_rpc(grpc_url, trace_rate=None),
    }
    return json.loads(json.dumps(out).replace(trace_file, "<file>"))


def _trace(**changes: Any) -> dict[str, Any]:
    """The trace settings a server without a file starts with, `changes` made."""
    return {"trace_level": ["OFF"], "trace_rate": "1000", "trace_count": "-1", "log_frequency": "0", "trace_file": "",
            "trace_mode": "triton"} | changes


def _log(**changes: Any) -> dict[str, Any]:
    return {"log_file": "", "log_info": True, "log_warning": True, "log_error": True, "log_verbose_level": 0,
            "log_format": "default"} | changes


WITHOUT_A_FILE: dict[str, Any] = {
    "get": (200, _trace()),
    # as Triton: a level is refused where its traces would go nowhere (mode triton without a file)
    "level_without_a_file": (400, {"error": NO_FILE}),
    "model_level_without_a_file": (400, {"error": NO_FILE}),
    "level_off": (200, _trace()),
    "level_off_and_another": (400, {"error": "Expect only one trace level 'OFF' is specified"}),
    "level_empty": (200, _trace()),
    "level_unknown": (400, {"error": "invalid trace level 'NOPE'"}),
    "level_in_lower_case": (400, {"error": "invalid trace level 'timestamps'"}),
    "level_a_string": (400, {"error": f"Unable to parse 'trace_level': {NON_ARRAY}"}),
    "level_a_number": (400, {"error": f"Unable to parse 'trace_level': {NON_STRING}"}),
    "rate": (200, _trace(trace_rate="5")),
    "rate_a_number": (400, {"error": f"Unable to parse 'trace_rate': {NON_STRING}"}),
    "rate_not_a_number": (400, {"error": "Unable to parse 'trace_rate', got: x"}),
    "rate_negative": (400, {"error": "Unable to parse 'trace_rate'. Expecting value >= 0, got: -1"}),
    "count": (200, _trace(trace_rate="5", trace_count="3")),
    "count_below_minus_one": (400, {"error": "Unable to parse 'trace_count'. Expecting value >= -1, got: -2"}),
    "log_frequency_not_a_number": (400, {"error": "Unable to parse 'log_frequency', got: y"}),
    "file": (501, {"error": "trace file location can not be updated through network protocol"}),
    "mode": (200, _trace(trace_rate="5", trace_count="3")),  # (as Triton: the mode is the server's, kept)
    "unknown_key": (400, {"error": "unknown trace setting 'nope'"}),
    "not_an_object": (400, {"error": "trace settings must be a JSON object"}),
    "model_rate": (200, _trace(trace_rate="3", trace_count="3")),
    "global_after_the_models": (200, _trace(trace_rate="5", trace_count="3")),
    "model_clears_its_rate": (200, _trace(trace_rate="5", trace_count="3")),
    "clear_rate": (200, _trace(trace_count="3")),  # (as Triton: back to what the server started with)
    "clear_count": (200, _trace()),
    "unknown_model": (400, {"error": "Request for unknown model : nope"}),
    "unknown_model_update": (400, {"error": "Request for unknown model : nope"}),
    "log_get": (200, _log()),
    "log_verbose": (200, _log(log_verbose_level=1)),
    "log_verbose_a_string": (400, {"error": f"Unable to parse 'log_verbose_level': {NON_UNSIGNED}"}),
    "log_verbose_negative": (400, {"error": f"Unable to parse 'log_verbose_level': {NON_UNSIGNED}"}),
    "log_verbose_true": (400, {"error": f"Unable to parse 'log_verbose_level': {NON_UNSIGNED}"}),
    "log_info": (200, _log(log_verbose_level=1, log_info=False)),
    "log_info_a_string": (400, {"error": f"Unable to parse 'log_info': {NON_BOOLEAN}"}),
    "log_info_a_number": (400, {"error": f"Unable to parse 'log_info': {NON_BOOLEAN}"}),
    "log_format": (200, _log(log_verbose_level=1, log_info=False, log_format="ISO8601")),
    "log_format_unknown": (503, {"error": "invalid argument for --log_format, got: nope"}),
    "log_format_a_number": (400, {"error": f"Unable to parse 'log_format': {NON_STRING}"}),
    "log_file": (501, {"error": "log file location can not be updated through network protocol"}),
    "log_unknown_key": (200, _log(log_verbose_level=1, log_info=False, log_format="ISO8601")),
    "log_nulls": (200, _log(log_verbose_level=1, log_info=False, log_format="ISO8601")),
    "log_reset": (200, _log()),
    "grpc_get": ("OK", _trace()),
    "grpc_level_without_a_file": ("INVALID_ARGUMENT", NO_FILE),
    "grpc_level_unknown": ("INVALID_ARGUMENT", "invalid trace level 'NOPE'"),
    "grpc_rate_twice": ("INVALID_ARGUMENT", "expect only 1 value for 'trace_rate'"),
    "grpc_rate_not_a_number": ("INVALID_ARGUMENT", "Unable to parse 'trace_rate', got: x"),
    "grpc_rate": ("OK", _trace(trace_rate="7")),
    "grpc_count_below_minus_one": ("INVALID_ARGUMENT", "Unable to parse 'trace_count'. Expecting value >= -1, got: -2"),
    "grpc_unknown_key": ("INVALID_ARGUMENT", "unknown trace setting 'nope'"),
    "grpc_file": ("UNIMPLEMENTED", "trace file location can not be updated through network protocol"),
    "grpc_mode": ("OK", _trace(trace_rate="7")),
    "grpc_model_rate": ("OK", _trace(trace_rate="9")),
    "grpc_model_clears_its_rate": ("OK", _trace(trace_rate="7")),
    "grpc_clear_rate": ("OK", _trace()),
    "grpc_unknown_model": ("INVALID_ARGUMENT", "Request for unknown model : nope"),
    "grpc_log_get": ("OK", _log()),
    "grpc_log_verbose": ("OK", _log(log_verbose_level=2)),
    "grpc_log_verbose_a_string": ("INVALID_ARGUMENT", "expect int32 for 'log_verbose_level'"),
    "grpc_log_verbose_unset": ("INVALID_ARGUMENT", "expect int32 for 'log_verbose_level'"),
    "grpc_log_info_a_number": ("INVALID_ARGUMENT", "expect boolean for 'log_info'"),
    "grpc_log_info_unset": ("INVALID_ARGUMENT", "expect boolean for 'log_info'"),
    "grpc_log_format_unknown": ("INVALID_ARGUMENT", "invalid argument for log_format, got: nope"),
    "grpc_log_format_a_bool": ("INVALID_ARGUMENT", "expect string for 'log_format'"),
    "grpc_log_unknown_key": ("OK", _log(log_verbose_level=2)),
    "grpc_log_file": ("UNIMPLEMENTED", "log file location can not be updated through network protocol"),
    "grpc_log_reset": ("OK", _log()),
}

# Where tritonserver 2.51 answers otherwise, and pytriton keeps its answer on purpose (docs/guide/tracing.md)
WITHOUT_A_FILE_TRITON_DIFFERS: dict[str, Any] = {
    # Triton takes a level it does not know as none at all: tracing goes OFF on a typo
    "level_unknown": (200, _trace()),
    "level_in_lower_case": (200, _trace()),
    "grpc_level_unknown": ("OK", _trace()),
    # a client's malformed value is a 400 (docs/guide/clients.md); the reason is Triton's
    "level_a_string": (500, {"error": NON_ARRAY}),
    "level_a_number": (500, {"error": NON_STRING}),
    "rate_a_number": (500, {"error": NON_STRING}),
    "log_verbose_a_string": (500, {"error": NON_UNSIGNED}),
    "log_verbose_negative": (500, {"error": NON_UNSIGNED}),
    "log_verbose_true": (500, {"error": NON_UNSIGNED}),
    "log_info_a_string": (500, {"error": NON_BOOLEAN}),
    "log_info_a_number": (500, {"error": NON_BOOLEAN}),
    "log_format_a_number": (500, {"error": NON_STRING}),
    # Triton wraps a negative rate around to 2^32 - 1
    "rate_negative": (200, _trace(trace_rate="4294967295")),
    "count": (200, _trace(trace_rate="4294967295", trace_count="3")),
    "mode": (200, _trace(trace_rate="4294967295", trace_count="3")),
    "global_after_the_models": (200, _trace(trace_rate="4294967295", trace_count="3")),
    "model_clears_its_rate": (200, _trace(trace_rate="4294967295", trace_count="3")),
    # (over HTTP Triton leaves out the space after "got:")
    "count_below_minus_one": (400, {"error": "Unable to parse 'trace_count'. Expecting value >= -1, got:-2"}),
    # Triton ignores a key it does not know, and a body that is not an object
    "unknown_key": (200, _trace(trace_rate="4294967295", trace_count="3")),
    "not_an_object": (200, _trace(trace_rate="4294967295", trace_count="3")),
    "grpc_unknown_key": ("OK", _trace(trace_rate="7")),
}


def _started_with_a_file(**changes: Any) -> dict[str, Any]:
    return _trace(trace_file="<file>") | changes


WITH_A_FILE: dict[str, Any] = {
    "get": (200, _started_with_a_file()),
    "level": (200, _started_with_a_file(trace_level=["TIMESTAMPS"], trace_rate="1")),
    "model_levels": (200, _started_with_a_file(trace_level=["TIMESTAMPS", "TENSORS"], trace_rate="1")),
    "model_clears_its_level": (200, _started_with_a_file(trace_level=["TIMESTAMPS"], trace_rate="1")),
    "clear_level": (200, _started_with_a_file(trace_rate="1")),
    "level_unknown": (400, {"error": "invalid trace level 'NOPE'"}),
    "grpc_level": ("OK", _started_with_a_file(trace_level=["TENSORS"], trace_rate="1")),
    "grpc_clear_level": ("OK", _started_with_a_file(trace_rate="1")),
    "grpc_clear_rate": ("OK", _started_with_a_file()),
}

WITH_A_FILE_TRITON_DIFFERS: dict[str, Any] = {
    "level_unknown": (200, _started_with_a_file(trace_rate="1")),
}


def _plain(value: Any) -> Any:
    """`value` as it reads back from JSON (tuples as lists), as the sequences give their answers."""
    return json.loads(json.dumps(value))


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    trace_file = str(tmp_path_factory.mktemp("trace") / "trace.json")
    with serve("--model-repository", str(REPOSITORY)) as server:
        without = _plain(_without_a_file(server.http_url, server.grpc_url))
    with serve("--model-repository", str(REPOSITORY), "--trace-config", f"triton,file={trace_file}") as server:
        with_file = _with_a_file(server.http_url, server.grpc_url, trace_file)
    return without, with_file


@pytest.mark.parametrize("case", WITHOUT_A_FILE)
def test_without_a_trace_file(answers, case):
    assert answers[0][case] == _plain(WITHOUT_A_FILE[case])


@pytest.mark.parametrize("case", WITH_A_FILE)
def test_with_a_trace_file(answers, case):
    assert answers[1][case] == _plain(WITH_A_FILE[case])


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_answers_as_the_tables_say():
    with tempfile.TemporaryDirectory() as scratch:
        urls: dict[str, str] = {}
        with real_tritonserver(REPOSITORY, Path(scratch) / "a", urls=urls) as grpc_url:
            without = _plain(_without_a_file(urls["http"], grpc_url))
        trace_file = str(Path(scratch) / "trace.json")
        with real_tritonserver(REPOSITORY, Path(scratch) / "b", urls=urls,
                               args=("--trace-config", f"triton,file={trace_file}")) as grpc_url:
            with_file = _with_a_file(urls["http"], grpc_url, trace_file)
    assert without == _plain(WITHOUT_A_FILE | WITHOUT_A_FILE_TRITON_DIFFERS)
    assert with_file == _plain(WITH_A_FILE | WITH_A_FILE_TRITON_DIFFERS)
