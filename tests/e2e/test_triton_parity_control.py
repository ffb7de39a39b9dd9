"""Model control in mode explicit as tritonserver 2.51 answers it, over raw HTTP and gRPC: loads and unloads of unknown
models, a load with a `config` override (valid, not JSON, naming another model, not a string), the repository index
(states and reasons after a load, an unload, a failed load), a model whose initialize() raises, readiness and metadata
of a model unloaded or never loaded. One sequence of requests; the answers pytriton gives are pinned case by case, and
(slow, where it is installed) the real tritonserver 2.51 gives the same on the same repository
(tests/repositories/triton_parity, models in Triton's own Python API), except where a case says why pytriton differs
on purpose (docs/guide/model-repositories.md)."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests._support.paths import REPOSITORIES
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, asked_of_real_tritonserver
from tests._support.serving import serve

REPOSITORY = REPOSITORIES / "triton_parity"
TIMEOUT_S = 30
EXPLICIT = ("--model-control-mode", "explicit")
CONFIG = {"name": "ident", "backend": "python", "max_batch_size": 0,
          "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1]}],
          "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}]}
NEVER_LOADED = [{"name": name} for name in (  # (in the index)
    "q_delay", "q_full", "q_levels", "q_no_batch", "q_no_override", "q_not_ragged", "q_optional", "q_override_only",
    "q_plain", "q_ragged", "q_unbatched",
    "r_cache", "scores", "seq_str", "seq_u64", "text")]
X = {"inputs": [{"name": "X", "datatype": "FP32", "shape": [1], "data": [1.0]}]}
INIT_ERROR = "RuntimeError: weights file missing for init_fails"
NOT_READY = "Model version not ready"
UNKNOWN_NOPE = "failed to load 'nope', failed to poll from model repository"
NO_VERSIONS = "Request for unknown model: '{}' has no available versions"
NOT_FOUND = "Request for unknown model: 'ident' is not found"
NON_STRING = "attempt to access JSON non-string as string"
POLL_FAILED = "failed to load 'ident', failed to poll from model repository"


def _failure(text: str) -> str:
    """A failed load's message or reason, its words up to the model's own error, and whether that error is there
    (how the rest is worded differs on purpose: pytriton gives the model's whole traceback)."""
    head = text.split(" state: ")[0] + " state: ..." if " state: " in text else "..."
    return f"{head} {INIT_ERROR in text}"


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


def _rpc(grpc_url: str, method: str, request: Any) -> tuple[str, Any]:
    with grpc.insecure_channel(grpc_url) as channel:
        try:
            answer = getattr(service_pb2_grpc.GRPCInferenceServiceStub(channel), method)(request, timeout=TIMEOUT_S)
        except grpc.RpcError as exc:
            return exc.code().name, exc.details()
    return "OK", json_format.MessageToDict(answer)


def _index(http_url: str) -> tuple[int, Any]:
    """The repository index once no model is UNLOADING (tritonserver answers an unload before its model is gone; a
    bounded wait for that state to pass, not for a guessed time)."""
    for _ in range(600):
        status, models = _http(http_url, "POST", "/v2/repository/index", {})
        if status != 200 or all(m.get("state") != "UNLOADING" for m in models):
            break
        time.sleep(0.05)
    return status, [m | {"reason": _failure(m["reason"])} if m["name"] == "init_fails" and "reason" in m else m
                    for m in models]


def _http_sequence(http_url: str) -> dict[str, Any]:
    def load(model: str, body: Any = None) -> tuple[int, Any]:
        return _http(http_url, "POST", f"/v2/repository/models/{model}/load", body)

    def unload(model: str) -> tuple[int, Any]:
        return _http(http_url, "POST", f"/v2/repository/models/{model}/unload")

    def get(path: str) -> tuple[int, Any]:
        return _http(http_url, "GET", path)

    def config(**changes: Any) -> dict[str, Any]:
        return {"parameters": {"config": json.dumps(CONFIG | changes)}}

    out: dict[str, Any] = {
        "index_at_start": _index(http_url),
        "index_of_the_ready": _http(http_url, "POST", "/v2/repository/index", {"ready": True}),
        "load_unknown": load("nope"),
        "unload_unknown": unload("nope"),
        "ready_never_loaded": get("/v2/models/ident/ready"),
        "metadata_never_loaded": get("/v2/models/ident"),
        "load": load("ident"),
        "load_again": load("ident"),
        "index_after_a_load": _index(http_url),
        "unload": unload("ident"),
        "index_after_an_unload": _index(http_url),
        "ready_after_an_unload": get("/v2/models/ident/ready"),
        "metadata_after_an_unload": get("/v2/models/ident"),
        "config_after_an_unload": get("/v2/models/ident/config"),
        "infer_after_an_unload": _http(http_url, "POST", "/v2/models/ident/infer", X),
        "unload_again": unload("ident"),
    }
    status, failed = load("init_fails")
    out["load_failing_in_initialize"] = status, _failure(failed["error"])
    out |= {
        "index_after_a_failed_load": _index(http_url),
        "ready_after_a_failed_load": get("/v2/models/init_fails/ready"),
        "metadata_after_a_failed_load": get("/v2/models/init_fails"),
        "load_with_a_config": load("ident", config(parameters={"p": {"string_value": "1"}})),
    }
    out["config_after_the_override"] = get("/v2/models/ident/config")[1].get("parameters")
    out |= {
        "load_with_a_config_not_json": load("ident", {"parameters": {"config": "{x"}}),
        "load_with_a_config_of_another_model": load("ident", config(name="other")),
        "load_with_a_config_a_number": load("ident", {"parameters": {"config": 5}}),
        "load_with_a_config_an_object": load("ident", {"parameters": {"config": CONFIG}}),
        "index_after_refused_configs": _index(http_url),
        "unload_at_the_end": unload("ident"),
    }
    return out


def _load(grpc_url: str, model: str, **parameters: service_pb2.ModelRepositoryParameter) -> tuple[str, Any]:
    return _rpc(grpc_url, "RepositoryModelLoad",
                service_pb2.RepositoryModelLoadRequest(model_name=model, parameters=parameters))


def _grpc_sequence(grpc_url: str, http_url: str) -> dict[str, Any]:
    def unload(model: str) -> tuple[str, Any]:
        return _rpc(grpc_url, "RepositoryModelUnload", service_pb2.RepositoryModelUnloadRequest(model_name=model))

    def parameter(**value: Any) -> service_pb2.ModelRepositoryParameter:
        return service_pb2.ModelRepositoryParameter(**value)

    out: dict[str, Any] = {
        "load_unknown": _load(grpc_url, "nope"),
        "unload_unknown": unload("nope"),
        "load": _load(grpc_url, "ident"),
        "load_with_a_config_a_number": _load(grpc_url, "ident", config=parameter(int64_param=5)),
        "load_with_a_config_a_bool": _load(grpc_url, "ident", config=parameter(bool_param=True)),
        "load_with_a_file_a_number": _load(grpc_url, "ident", config=parameter(string_param=json.dumps(CONFIG)),
                                           **{"file:1/model.py": parameter(int64_param=3)}),
        "load_with_a_config_not_json": _load(grpc_url, "ident", config=parameter(string_param="{x")),
    }
    status, failed = _load(grpc_url, "init_fails")
    out["load_failing_in_initialize"] = status, _failure(failed)
    out |= {
        "ready_after_a_failed_load": _rpc(grpc_url, "ModelReady", service_pb2.ModelReadyRequest(name="init_fails")),
        "metadata_after_a_failed_load": _rpc(grpc_url, "ModelMetadata",
                                             service_pb2.ModelMetadataRequest(name="init_fails")),
        "unload": unload("ident"),
    }
    _index(http_url)  # (until the unload is over)
    out |= {
        "ready_after_an_unload": _rpc(grpc_url, "ModelReady", service_pb2.ModelReadyRequest(name="ident")),
        "metadata_after_an_unload": _rpc(grpc_url, "ModelMetadata", service_pb2.ModelMetadataRequest(name="ident")),
        "index": _rpc(grpc_url, "RepositoryIndex", service_pb2.RepositoryIndexRequest()),
    }
    return out


def _both_sequences(http_url: str, grpc_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return _http_sequence(http_url), _grpc_sequence(grpc_url, http_url)


def _unloaded(*more: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "ident", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}, *more,
            *NEVER_LOADED]


FAILED = {"name": "init_fails", "version": "1", "state": "UNAVAILABLE", "reason": "... True"}
LOAD_FAILED = "load failed for model 'init_fails': version 1 is at UNAVAILABLE state: ... True"

HTTP_OURS: dict[str, Any] = {
    "index_at_start": (200, [{"name": "ident"}, {"name": "init_fails"}, *NEVER_LOADED]),
    "index_of_the_ready": (200, []),
    "load_unknown": (500, {"error": UNKNOWN_NOPE}),
    "unload_unknown": (200, ""),
    "ready_never_loaded": (400, {"error": NOT_READY}),
    "metadata_never_loaded": (404, {"error": NOT_FOUND}),
    "load": (200, ""),  # (as Triton: no body)
    "load_again": (200, ""),
    "index_after_a_load": (200, [{"name": "ident", "version": "1", "state": "READY"}, {"name": "init_fails"},
                                 *NEVER_LOADED]),  # (as Triton: no empty reason)
    "unload": (200, ""),
    "index_after_an_unload": (200, _unloaded({"name": "init_fails"})),
    "ready_after_an_unload": (400, {"error": NOT_READY}),
    "metadata_after_an_unload": (404, {"error": NO_VERSIONS.format("ident")}),
    "config_after_an_unload": (404, {"error": NO_VERSIONS.format("ident")}),
    "infer_after_an_unload": (404, {"error": NO_VERSIONS.format("ident")}),
    "unload_again": (200, ""),
    "load_failing_in_initialize": (400, LOAD_FAILED),
    "index_after_a_failed_load": (200, _unloaded(FAILED)),
    "ready_after_a_failed_load": (400, {"error": NOT_READY}),
    "metadata_after_a_failed_load": (404, {"error": NO_VERSIONS.format("init_fails")}),
    "load_with_a_config": (200, ""),
    "config_after_the_override": {"p": {"string_value": "1"}},
    "load_with_a_config_not_json": (400, {"error": "failed to load 'ident': the 'config' parameter is not a valid "
                                                   "model configuration in JSON: Expecting property name enclosed in "
                                                   "double quotes: line 1 column 2 (char 1)"}),
    "load_with_a_config_of_another_model": (400, {"error": (
        "load failed for model 'ident': version 1 is at UNAVAILABLE state: the configuration given to load model "
        "'ident': field 'name' of model 'other': the model name must match its directory: 'other' is in directory "
        "'ident';")}),
    "load_with_a_config_a_number": (400, {"error": f"Unable to parse 'config': {NON_STRING}"}),
    "load_with_a_config_an_object": (400, {"error": f"Unable to parse 'config': {NON_STRING}"}),
    "index_after_refused_configs": (200, [{"name": "ident", "version": "1", "state": "READY"}, FAILED,
                                          *NEVER_LOADED]),
    "unload_at_the_end": (200, ""),
}

# Where tritonserver 2.51 answers otherwise, and pytriton keeps its answer on purpose
HTTP_TRITON_DIFFERS: dict[str, Any] = {
    # a config override that is not a model's configuration is refused saying why (Triton: "failed to poll")
    "load_with_a_config_not_json": (500, {"error": POLL_FAILED}),
    "load_with_a_config_of_another_model": (500, {"error": POLL_FAILED}),
    # a client's malformed parameter is a 400 (docs/guide/clients.md); the reason is Triton's
    "load_with_a_config_a_number": (500, {"error": NON_STRING}),
    "load_with_a_config_an_object": (500, {"error": NON_STRING}),
}

GRPC_OURS: dict[str, Any] = {
    "load_unknown": ("INTERNAL", UNKNOWN_NOPE),
    "unload_unknown": ("OK", {}),
    "load": ("OK", {}),
    "load_with_a_config_a_number": ("INVALID_ARGUMENT",
                                    "invalid value type for load parameter 'config', expected string_param."),
    "load_with_a_config_a_bool": ("INVALID_ARGUMENT",
                                  "invalid value type for load parameter 'config', expected string_param."),
    "load_with_a_file_a_number": ("INVALID_ARGUMENT",
                                  "invalid value type for load parameter 'file:1/model.py', expected bytes_param."),
    "load_with_a_config_not_json": ("INVALID_ARGUMENT", "failed to load 'ident': the 'config' parameter is not a valid "
                                                        "model configuration in JSON: Expecting property name enclosed "
                                                        "in double quotes: line 1 column 2 (char 1)"),
    "load_failing_in_initialize": ("INVALID_ARGUMENT", LOAD_FAILED),
    "ready_after_a_failed_load": ("OK", {}),
    "metadata_after_a_failed_load": ("NOT_FOUND", NO_VERSIONS.format("init_fails")),
    "unload": ("OK", {}),
    "ready_after_an_unload": ("OK", {}),
    "metadata_after_an_unload": ("NOT_FOUND", NO_VERSIONS.format("ident")),
    "index": ("OK", {"models": _unloaded(FAILED | {"reason": "..."})}),
}

GRPC_TRITON_DIFFERS: dict[str, Any] = {
    "load_with_a_config_not_json": ("INTERNAL", POLL_FAILED),
}


def _plain(value: Any) -> Any:
    """`value` as it reads back from JSON (tuples as lists), as the sequences give their answers."""
    return json.loads(json.dumps(value))


def _comparable(answers: tuple[dict[str, Any], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The answers with the gRPC index's failed reason reduced as the HTTP ones are."""
    over_http, over_grpc = _plain(answers)
    status, index = over_grpc["index"]
    if status == "OK":
        for model in index["models"]:
            if model["name"] == "init_fails":
                model["reason"] = "..." if INIT_ERROR in model.get("reason", "") else model.get("reason")
    return over_http, over_grpc


@pytest.fixture(scope="module")
def answers():
    with serve("--model-repository", str(REPOSITORY), *EXPLICIT) as server:
        return _comparable(_both_sequences(server.http_url, server.grpc_url))


@pytest.mark.parametrize("case", HTTP_OURS)
def test_over_http(answers, case):
    assert answers[0][case] == _plain(HTTP_OURS[case])


@pytest.mark.parametrize("case", GRPC_OURS)
def test_over_grpc(answers, case):
    assert answers[1][case] == _plain(GRPC_OURS[case])


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_answers_as_the_tables_say():
    over_http, over_grpc = _comparable(asked_of_real_tritonserver(REPOSITORY, _both_sequences, EXPLICIT))
    assert over_http == _plain(HTTP_OURS | HTTP_TRITON_DIFFERS)
    assert over_grpc == _plain(GRPC_OURS | GRPC_TRITON_DIFFERS)
