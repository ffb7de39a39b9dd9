"""Control messages: JSON round trips, versioning-safe parsing, and errors that name the operation and field."""

from __future__ import annotations

import json

import pytest

from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.control import (
    CONTROL_VERSION,
    ControlError,
    ControlMessageError,
    InfoReply,
    InfoRequest,
    LoadReply,
    LoadRequest,
    ModelReadyReply,
    ModelReadyRequest,
    ServerInfo,
    UnloadReply,
    UnloadRequest,
    error_reply,
    parse_request,
)

CONFIG = TritonModelConfig(model_name="m", inputs=[TensorSpec("IN", "FP32", (-1,))],
                           outputs=[TensorSpec("OUT", "FP32", (-1,))], max_batch_size=8)
SERVER = ServerInfo(address="ipc:///tmp/x/workers.sock", tag="0123abcd", server_pid=42, inline_max=65536)


@pytest.mark.parametrize(
    "request_",
    [
        InfoRequest(),
        LoadRequest(config=CONFIG, hosting="spawn", callable="tests.models:identity"),
        LoadRequest(config=CONFIG, hosting="external", timeout_s=12.5),
        UnloadRequest("m"),
        ModelReadyRequest("m"),
    ],
)
def test_requests_round_trip(request_):
    text = request_.to_json()
    assert json.loads(text)["v"] == CONTROL_VERSION
    assert parse_request(text) == request_


@pytest.mark.parametrize(
    "request_, reply",
    [
        (InfoRequest(), InfoReply(SERVER)),
        (LoadRequest(config=CONFIG, hosting="external"), LoadReply(SERVER, ["m#0#x1", "m#1#x1"])),
        (UnloadRequest("m"), UnloadReply(SERVER)),
        (ModelReadyRequest("m"), ModelReadyReply(SERVER, True)),
    ],
)
def test_replies_round_trip(request_, reply):
    assert request_.parse_reply(reply.to_json(request_.OP)) == reply


def test_an_error_reply_raises_control_error_with_the_servers_reason():
    with pytest.raises(ControlError, match="model 'm' failed to start: boom"):
        UnloadRequest("m").parse_reply(error_reply("unload", "model 'm' failed to start: boom"))


def test_fields_from_a_newer_version_are_ignored_and_missing_optional_fields_take_defaults():
    text = json.dumps({"v": CONTROL_VERSION + 1, "op": "load", "config": CONFIG.to_dict(), "hosting": "external",
                       "priority": "high"})
    assert parse_request(text) == LoadRequest(config=CONFIG, hosting="external", timeout_s=300.0)
    reply = json.dumps({"v": CONTROL_VERSION + 1, "op": "model_ready", "ok": True, "ready": True, "extra": [1],
                        "server": {**SERVER.__dict__, "hostname": "h"}})
    assert ModelReadyRequest("m").parse_reply(reply) == ModelReadyReply(SERVER, True)


@pytest.mark.parametrize(
    "message, error",
    [
        ({"op": "reboot"}, "unknown control operation 'reboot' (known: info, load, unload, model_ready)"),
        ({"model": "m"}, "unknown control operation None"),
        ({"op": "unload"}, "control 'unload': missing field 'model'"),
        ({"op": "unload", "model": 7}, "control 'unload': field 'model': expected str, got int"),
        ({"op": "load", "config": CONFIG.to_dict(), "timeout_s": "soon", "hosting": "external"},
         "control 'load': field 'timeout_s': expected float, got str"),
        ({"op": "load", "config": CONFIG.to_dict(), "timeout_s": True, "hosting": "external"},
         "field 'timeout_s': expected float, got bool"),
        ({"op": "load", "config": {"model_name": "m"}}, "control 'load': field 'config': invalid model configuration"),
        ({"op": "load", "config": CONFIG.to_dict(), "hosting": "cloud"},
         "field 'hosting' must be one of spawn, external, got 'cloud'"),
        ({"op": "load", "config": CONFIG.to_dict()}, "field 'callable' is required when hosting is 'spawn'"),
        ({"op": "load", "config": [1]}, "field 'config': invalid model configuration"),
    ],
)
def test_bad_requests_name_the_operation_and_field(message, error):
    with pytest.raises(ControlMessageError) as raised:
        parse_request(json.dumps(message))
    assert error in str(raised.value)


@pytest.mark.parametrize("text, error", [("not json", "not JSON"), ("[1, 2]", "expected a JSON object, got list")])
def test_text_that_is_not_a_message_is_refused(text, error):
    with pytest.raises(ControlMessageError, match=error):
        parse_request(text)


def test_a_malformed_reply_names_the_request_it_answers():
    reply = json.dumps({"v": 1, "op": "model_ready", "ok": True, "ready": "yes", "server": SERVER.__dict__})
    with pytest.raises(ControlMessageError, match="reply to 'model_ready': field 'ready': expected bool"):
        ModelReadyRequest("m").parse_reply(reply)
    reply = json.dumps({"v": 1, "op": "load", "ok": True, "identities": ["a"]})
    with pytest.raises(ControlMessageError, match="reply to 'load': missing field 'server'"):
        LoadRequest(config=CONFIG, hosting="external").parse_reply(reply)
