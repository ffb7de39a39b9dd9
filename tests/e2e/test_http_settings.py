"""Log and trace settings over HTTP and gRPC (tritonclient.http / tritonclient.grpc), one server, shared state.

Every test restores what it changed: with xdist each worker has its own server, but tests of one worker share it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._support.serving import serve, tensor_args

TIMEOUT_S = 30
LOG_DEFAULTS = {"log_file": "", "log_info": True, "log_warning": True, "log_error": True, "log_verbose_level": 0,
                "log_format": "default"}
# (a trace file, so that a level may be set: as Triton, mode triton refuses one without a file)
TRACE_FILE = str(Path(tempfile.gettempdir()) / f"pytriton_http_settings_{os.getpid()}.json")
TRACE_DEFAULTS = {"trace_level": ["OFF"], "trace_rate": "1000", "trace_count": "-1", "log_frequency": "0",
                  "trace_file": TRACE_FILE, "trace_mode": "triton"}
PROTOCOLS = ["http", "grpc"]
# Triton status per protocol for the error kinds used here.
STATUS = {
    "http": {"UNSUPPORTED": "501", "INVALID_ARG": "400", "UNAVAILABLE": "503"},
    "grpc": {"UNSUPPORTED": "StatusCode.UNIMPLEMENTED", "INVALID_ARG": "StatusCode.INVALID_ARGUMENT",
             "UNAVAILABLE": "StatusCode.UNAVAILABLE"},
}


@pytest.fixture(scope="module")
def server():
    args = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")])
    try:
        with serve("tests.models:identity", *args, "--trace-config", f"triton,file={TRACE_FILE}") as s:
            yield s
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(TRACE_FILE)


class Settings:
    """Log/trace settings through one protocol, as plain dicts in the HTTP JSON form."""

    def __init__(self, server, protocol: str):
        self.protocol = protocol
        if protocol == "http":
            self.client: Any = httpclient.InferenceServerClient(server.http_url, network_timeout=TIMEOUT_S)
        else:
            self.client = grpcclient.InferenceServerClient(server.grpc_url)

    def close(self) -> None:
        self.client.close()

    @staticmethod
    def _log_from_grpc(response: dict) -> dict:
        out = {}
        for key, value in response["settings"].items():
            (kind, v), = value.items()
            out[key] = int(v) if kind == "uint32Param" else v
        return out

    @staticmethod
    def _trace_from_grpc(response: dict, key_list=("trace_level",)) -> dict:
        out = {}
        for key, value in response["settings"].items():
            values = value.get("value", [])
            out[key] = values if key in key_list else (values[0] if values else None)
        return out

    def get_log(self) -> dict:
        if self.protocol == "http":
            return self.client.get_log_settings()
        return self._log_from_grpc(self.client.get_log_settings(as_json=True))

    def update_log(self, settings: dict) -> dict:
        if self.protocol == "http":
            return self.client.update_log_settings(settings)
        return self._log_from_grpc(self.client.update_log_settings(settings, as_json=True))

    def get_trace(self, model: str | None = None) -> dict:
        if self.protocol == "http":
            return self.client.get_trace_settings(model_name=model)
        return self._trace_from_grpc(self.client.get_trace_settings(model_name=model, as_json=True))

    def update_trace(self, settings: dict, model: str | None = None) -> dict:
        if self.protocol == "http":
            return self.client.update_trace_settings(model_name=model, settings=settings)
        return self._trace_from_grpc(self.client.update_trace_settings(model_name=model, settings=settings,
                                                                       as_json=True))


@pytest.fixture(scope="module", params=PROTOCOLS)
def settings(server, request):
    s = Settings(server, request.param)
    yield s
    s.close()


@pytest.fixture(scope="module")
def both(server):
    pair = {p: Settings(server, p) for p in PROTOCOLS}
    yield pair
    for s in pair.values():
        s.close()


def expect_error(call, protocol: str, kind: str, message: str) -> None:
    with pytest.raises(InferenceServerException) as info:
        call()
    assert info.value.status() == STATUS[protocol][kind], info.value.message()
    assert info.value.message() == message


# ---- logging -------------------------------------------------------------------------------------------------------

def test_log_settings_defaults(settings):
    assert settings.get_log() == LOG_DEFAULTS


def test_log_settings_update_is_shared_by_both_protocols(settings, both):
    other = both["grpc" if settings.protocol == "http" else "http"]
    try:
        changed = settings.update_log({"log_verbose_level": 2, "log_info": False, "log_format": "ISO8601"})
        expected = {**LOG_DEFAULTS, "log_verbose_level": 2, "log_info": False, "log_format": "ISO8601"}
        assert changed == expected
        assert settings.get_log() == expected
        assert other.get_log() == expected
        # A partial update keeps the rest.
        assert settings.update_log({"log_warning": False}) == {**expected, "log_warning": False}
    finally:
        assert settings.update_log({k: v for k, v in LOG_DEFAULTS.items() if k != "log_file"}) == LOG_DEFAULTS


def test_log_settings_empty_update_changes_nothing(server, settings):
    assert settings.update_log({}) == LOG_DEFAULTS
    if settings.protocol == "http":  # an empty POST body is allowed too
        conn = http.client.HTTPConnection(server.http_url, timeout=TIMEOUT_S)
        conn.request("POST", "/v2/logging", body=b"")
        response = conn.getresponse()
        assert (response.status, json.loads(response.read())) == (200, LOG_DEFAULTS)
        conn.close()


def test_log_file_update_refused(settings):
    expect_error(lambda: settings.update_log({"log_file": "/tmp/elsewhere.log"}), settings.protocol, "UNSUPPORTED",
                 "log file location can not be updated through network protocol")
    assert settings.get_log() == LOG_DEFAULTS


def test_log_file_update_refused_even_if_unchanged(settings):
    expect_error(lambda: settings.update_log({"log_file": ""}), settings.protocol, "UNSUPPORTED",
                 "log file location can not be updated through network protocol")


def test_log_file_refusal_changes_nothing_else(settings):
    with pytest.raises(InferenceServerException):
        settings.update_log({"log_verbose_level": 3, "log_file": "/tmp/x.log"})
    assert settings.get_log()["log_file"] == ""


def test_bad_log_format(settings):
    """In tritonserver 2.51's words and codes, which differ by protocol."""
    if settings.protocol == "http":
        expect_error(lambda: settings.update_log({"log_format": "xml"}), "http", "UNAVAILABLE",
                     "invalid argument for --log_format, got: xml")
    else:
        expect_error(lambda: settings.update_log({"log_format": "xml"}), "grpc", "INVALID_ARG",
                     "invalid argument for log_format, got: xml")
    assert settings.get_log() == LOG_DEFAULTS


def test_bad_log_value_types_http(server):
    for body in ({"log_info": "yes"}, {"log_verbose_level": -1}, {"log_verbose_level": "2"}):
        conn = http.client.HTTPConnection(server.http_url, timeout=TIMEOUT_S)
        conn.request("POST", "/v2/logging", body=json.dumps(body).encode())
        response = conn.getresponse()
        assert response.status in (400, 500), body
        assert json.loads(response.read())["error"]
        conn.close()
    with httpclient.InferenceServerClient(server.http_url) as c:
        assert c.get_log_settings() == LOG_DEFAULTS


def test_logging_route_malformed_json(server):
    conn = http.client.HTTPConnection(server.http_url, timeout=TIMEOUT_S)
    conn.request("POST", "/v2/logging", body=b"{not json")
    response = conn.getresponse()
    assert response.status == 400 and json.loads(response.read())["error"]
    conn.close()


# ---- trace -----------------------------------------------------------------------------------------------------------

def test_trace_settings_defaults(settings):
    assert settings.get_trace() == TRACE_DEFAULTS
    assert settings.get_trace("identity") == TRACE_DEFAULTS


def test_trace_settings_global_and_per_model(settings, both):
    other = both["grpc" if settings.protocol == "http" else "http"]
    try:
        changed = settings.update_trace({"trace_rate": "5", "trace_level": ["TIMESTAMPS"]})
        global_expected = {**TRACE_DEFAULTS, "trace_rate": "5", "trace_level": ["TIMESTAMPS"]}
        assert changed == global_expected
        assert other.get_trace() == global_expected
        # The model inherits the global settings it does not set itself.
        assert settings.get_trace("identity") == global_expected
        model_expected = {**global_expected, "trace_count": "10", "trace_level": ["TIMESTAMPS", "TENSORS"]}
        assert settings.update_trace({"trace_count": "10", "trace_level": ["TIMESTAMPS", "TENSORS"]},
                                     "identity") == model_expected
        assert other.get_trace("identity") == model_expected
        assert settings.get_trace() == global_expected  # global unchanged
        # A later global change shows through where the model did not override.
        assert settings.update_trace({"log_frequency": "7"}) == {**global_expected, "log_frequency": "7"}
        assert settings.get_trace("identity") == {**model_expected, "log_frequency": "7"}
        # Clearing with null falls back to the global value.
        cleared = settings.update_trace({"trace_count": None}, "identity")
        assert cleared == {**model_expected, "log_frequency": "7", "trace_count": "-1"}
        cleared = settings.update_trace({"trace_level": None}, "identity")
        assert cleared == {**global_expected, "log_frequency": "7"}
    finally:
        settings.update_trace({"trace_level": None, "trace_count": None, "trace_rate": None, "log_frequency": None},
                              "identity")
        restored = settings.update_trace({k: v for k, v in TRACE_DEFAULTS.items() if k != "trace_file"})
        assert restored == TRACE_DEFAULTS
        assert settings.get_trace("identity") == TRACE_DEFAULTS


def test_trace_file_update_refused(settings):
    for model in (None, "identity"):
        expect_error(lambda model=model: settings.update_trace({"trace_file": "/tmp/trace.json"}, model),
                     settings.protocol,
                     "UNSUPPORTED", "trace file location can not be updated through network protocol")
    assert settings.get_trace() == TRACE_DEFAULTS


def test_trace_settings_unknown_model(settings):
    expect_error(lambda: settings.get_trace("nope"), settings.protocol, "INVALID_ARG",
                 "Request for unknown model : nope")
    expect_error(lambda: settings.update_trace({"trace_rate": "3"}, "nope"), settings.protocol, "INVALID_ARG",
                 "Request for unknown model : nope")


def test_trace_settings_bad_values(settings):
    for change in ({"trace_rate": "fast"}, {"trace_count": "-5"}, {"trace_level": ["LOUD"]}):
        with pytest.raises(InferenceServerException) as info:
            settings.update_trace(change)
        assert info.value.status() == STATUS[settings.protocol]["INVALID_ARG"], change
    assert settings.get_trace() == TRACE_DEFAULTS


def test_trace_route_methods(server):
    for path in ("/v2/trace/setting", "/v2/models/identity/trace/setting"):
        conn = http.client.HTTPConnection(server.http_url, timeout=TIMEOUT_S)
        conn.request("PUT", path, body=b"{}")
        response = conn.getresponse()
        assert (response.status, json.loads(response.read())) == (405, {"error": "Method Not Allowed"})
        conn.close()
