"""The generate extension's JSON <-> tensors (pytriton/frontend/http/generate.py) on its own: how keys become inputs
and parameters, how values are shaped and read, how responses are flattened, with tritonserver 2.51's words (recorded
from it: tests/e2e/test_generate.py compares the two servers live)."""

from __future__ import annotations

import numpy as np
import pytest

from pytriton.core.types import InferResponse, Tensor
from pytriton.exceptions import ServerError, Status
from pytriton.frontend.http.generate import (
    event,
    generate_request,
    input_shape,
    input_tensor,
    parse_body,
    response_object,
)
from pytriton.model_config.datatypes import deserialize_bytes_tensor, serialize_bytes_tensor

INPUTS = {"text_input": ("BYTES", [1]), "scale": ("FP32", [2, -1]), "n": ("INT8", [-1])}


def refusal(call, *args) -> tuple[Status, str]:
    with pytest.raises(ServerError) as info:
        call(*args)
    return info.value.status, info.value.message


@pytest.mark.parametrize(("dims", "count", "shape"), [
    ([1], 1, (1,)), ([-1], 3, (3,)), ([-1, 1], 1, (1, 1)), ([2, -1], 4, (2, 2)), ([-1, -1], 3, (1, 3)),
    ([-1, 2, -1], 6, (1, 2, 3)), ([-1], 0, (0,)),
])
def test_shapes_as_triton_gives_them(dims, count, shape):
    assert input_shape("x", dims, count) == shape


@pytest.mark.parametrize(("dims", "count"), [([1], 2), ([2, -1], 3), ([1], 0), ([0], 0), ([3], 1)])
def test_a_count_the_dims_cannot_hold(dims, count):
    assert refusal(input_shape, "x", dims, count) == (
        Status.INVALID_ARG, "The schema can not convert input 'x' to tensor with proper shape")


def test_values_are_read_into_the_datatype_nested_arrays_in_order_narrow_types_wrapping():
    tensor = input_tensor("n", "INT8", [-1], [1, -2, 300])
    assert (tensor.shape, np.frombuffer(tensor.data, np.int8).tolist()) == ((3,), [1, -2, 44])
    tensor = input_tensor("scale", "FP32", [2, -1], [1, 2, 3.5, 4])
    assert np.frombuffer(tensor.data, np.float32).tolist() == [1, 2, 3.5, 4]
    tensor = input_tensor("t", "BYTES", [-1], ["a", ["é", "c"]])
    assert tensor.shape == (2,)  # (the top-level count shapes it; the leaves are the data)
    assert deserialize_bytes_tensor(tensor.data).tolist() == [b"a", "é".encode(), b"c"]
    assert input_tensor("b", "BOOL", [1], True).data == b"\x01"


@pytest.mark.parametrize(("datatype", "value", "words"), [
    ("INT32", "x", "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"),
    ("INT32", 1.5, "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"),
    ("UINT8", -1, "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer"),
    ("FP32", True, "Unable to parse 'data': attempt to access JSON non-number as double"),
    ("BOOL", 1, "Unable to parse 'data': attempt to access JSON non-boolean as boolean"),
    ("BYTES", 5, "Unable to parse JSON bytes array: attempt to access JSON non-string as string"),
])
def test_values_of_the_wrong_json_type(datatype, value, words):
    assert refusal(input_tensor, "x", datatype, [1], value) == (Status.INTERNAL, words)


def test_nested_arrays_that_do_not_match_the_top_level_count():
    words = "Unable to parse 'data': Shape does not match true shape of 'data' field"
    assert refusal(input_tensor, "x", "FP32", [-1], [[1, 2], [3, 4]]) == (Status.INTERNAL, words)
    assert refusal(input_tensor, "x", "FP32", [-1], [[], [1]]) == (Status.INTERNAL, words)
    assert refusal(input_tensor, "x", "FP16", [1], 1) == (
        Status.INVALID_ARG, "receiving FP16 data via JSON is not supported. Please use the binary data format for "
                            "input x")


def test_keys_become_inputs_or_parameters_and_parameters_may_hold_inputs():
    request = generate_request("m", "", {
        "id": "7", "text_input": "hi", "temperature": 0.5, "big": 1 << 63, "stream": True,
        "parameters": {"n": [1, 2], "top_k": 3, "triton_x": "y"}}, INPUTS)
    assert request.id == "7"
    assert [(t.name, t.shape) for t in request.inputs] == [("text_input", (1,)), ("n", (2,))]
    assert request.parameters == {"id": "7", "temperature": 0.5, "big": float(1 << 63), "stream": True, "top_k": 3,
                                  "triton_x": "y"}


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"id": 5}, Status.INTERNAL, "Unable to parse 'id': attempt to access JSON non-string as string"),
    ({"x": None}, Status.INVALID_ARG, "parameter 'x' has invalid type. It should be either 'int', 'bool', or "
                                      "'string'."),
    ({"parameters": [1]}, Status.INTERNAL,
     "Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object"),
    ({"parameters": {"parameters": {}}}, Status.INVALID_ARG,
     "Converting keyword: 'parameters': parameter 'parameters' has invalid type. It should be either 'int', "
     "'bool', or 'string'."),
    ({"id": "q", "n": 1, "parameters": {"n": 2}}, Status.INVALID_ARG,
     "Converting keyword: 'parameters': [request id: q] input 'n' already exists in request"),
])
def test_requests_triton_refuses(body, status, words):
    assert refusal(generate_request, "m", "", body, INPUTS) == (status, words)


@pytest.mark.parametrize(("body", "words"), [
    (b"", "failed to parse the request JSON buffer: The document is empty. at 0"),
    (b"  ", "failed to parse the request JSON buffer: The document is empty. at 0"),
    (b"[1]", "attempt to get members for non-object"),
    (b'"x"', "attempt to get members for non-object"),
])
def test_bodies_that_are_no_json_object(body, words):
    assert refusal(parse_body, body) == (Status.INTERNAL, words)
    status, message = refusal(parse_body, b'{"a": ')
    assert status is Status.INTERNAL and message.startswith("failed to parse the request JSON buffer: ")


@pytest.mark.parametrize(("body", "words"), [
    # Triton reads every member in order: the first input given a second time is refused (orjson kept the last)
    (b'{"n": 1, "text_input": "a", "n": 2}', "input 'n' already exists in request"),
    (b'{"n": 1, "text_input": "a", "text_input": "b", "n": 2}', "input 'text_input' already exists in request"),
    (b'{"n": 1, "parameters": {"text_input": "a", "text_input": "b"}}',
     "Converting keyword: 'parameters': [request id: <id_unknown>] input 'text_input' already exists in request"),
    (b'{"n": 1, "\\u006e": 2}', "input 'n' already exists in request"),  # (the same key, written with an escape)
])
def test_an_input_given_twice_in_the_body_is_refused(body, words):
    status, message = refusal(lambda: generate_request("m", "", parse_body(body), INPUTS))
    assert status is Status.INVALID_ARG and message.endswith(words), message


def test_a_repeated_parameter_keeps_its_last_value_and_a_value_naming_a_key_is_no_repeat():
    request = generate_request("m", "", parse_body(b'{"n": 1, "x": 1, "x": 2, "text_input": "n", "y": "n"}'), INPUTS)
    assert request.parameters == {"x": 2, "y": "n"}
    assert sorted(t.name for t in request.inputs) == ["n", "text_input"]


def _response(outputs, parameters=None, request_id=""):
    released = []
    response = InferResponse("m", "3", request_id, outputs, parameters or {}, lambda: released.append(True))
    return response, released


def test_responses_are_flattened_with_keys_sorted_and_the_first_of_a_name_kept():
    response, _ = _response([
        Tensor("text_output", "BYTES", (1,), serialize_bytes_tensor(np.array([b"done"], dtype=np.object_))),
        Tensor("logits", "FP32", (2, 2), np.arange(4, dtype=np.float32).tobytes()),
        Tensor("one", "INT64", (1, 1), np.array([[7]], dtype=np.int64).tobytes()),
        Tensor("none", "INT32", (0,), b""),
        Tensor("model_name", "INT32", (1,), np.array([1], dtype=np.int32).tobytes()),  # (taken: left out)
        Tensor("score", "INT32", (1,), np.array([1], dtype=np.int32).tobytes()),  # (a parameter's name: left out)
    ], {"score": 0.5, "done": True}, "r")
    answer = response_object(response)
    assert list(answer) == sorted(answer)
    assert answer == {"done": True, "id": "r", "logits": [0.0, 1.0, 2.0, 3.0], "model_name": "m",
                      "model_version": "3", "none": [], "one": 7, "score": 0.5, "text_output": "done"}


def test_a_response_triton_cannot_write_as_json():
    response, _ = _response([Tensor("h", "FP16", (1,), b"\x00\x00")])
    assert refusal(response_object, response) == (
        Status.INVALID_ARG, "sending FP16 data via JSON is not supported. Please use the binary data format for output")
    response, _ = _response([], {"blob": b"x"})
    assert refusal(response_object, response) == (
        Status.UNSUPPORTED, "Response parameter 'blob' has type 'TRITONSERVER_PARAMETER_BYTES' which is not currently "
                            "supported")


def test_an_event_is_one_data_line_and_a_blank_line():
    assert event(b'{"a":1}') == b'data: {"a":1}\n\n'


# ---- the routes' answers, on a fake core ---------------------------------------------------------
class FakeCore:
    """What `generate` asks of the core: a model's metadata and config, and its answers (`answers`: responses, or
    a ServerError raised where it stands) as `infer` or `infer_stream` gives them."""

    def __init__(self, decoupled: bool, answers: list):
        from types import SimpleNamespace

        self.model = SimpleNamespace(config=SimpleNamespace(decoupled=decoupled))
        self.registry = SimpleNamespace(get=lambda name, version: self.model)
        self.answers = answers
        self.closed = False

    def model_metadata(self, name, version):
        return {"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1]}]}

    async def infer(self, request):
        answer = self.answers[0]
        if isinstance(answer, ServerError):
            raise answer
        return answer

    async def infer_stream(self, request):
        try:
            for answer in self.answers:
                if isinstance(answer, ServerError):
                    raise answer
                yield answer
        finally:
            self.closed = True


def _answer(core, streaming, monkeypatch):
    import asyncio

    from pytriton.frontend.http import generate as module
    from pytriton.frontend.http1 import HttpRequest

    monkeypatch.setattr(module, "validate_request", lambda config, request: 1)
    request = HttpRequest("POST", "/v2/models/m/generate", "", {}, b'{"text_input": "a"}')

    async def run():
        answer = await module.generate(core, request, "m", "", streaming)
        body = b"".join(answer.parts)
        if answer.stream is not None:
            body += b"".join([part async for part in answer.stream])
        return answer.status, dict(answer.headers)["Content-Type"], body

    return asyncio.run(run())


def _text(value: str) -> InferResponse:
    data = serialize_bytes_tensor(np.array([value.encode()], dtype=np.object_))
    return _response([Tensor("text_output", "BYTES", (1,), data)])[0]


@pytest.mark.parametrize("decoupled", [False, True])
def test_a_refusal_at_submission_is_an_http_error_and_a_model_error_the_first_event(monkeypatch, decoupled):
    full = ServerError(Status.UNAVAILABLE, "[request id: <id_unknown>] Exceeds maximum queue size")
    with pytest.raises(ServerError) as info:  # (the app answers it: 503, JSON)
        _answer(FakeCore(decoupled, [full]), True, monkeypatch)
    assert info.value is full
    failed = ServerError(Status.INTERNAL, "the model failed")
    assert _answer(FakeCore(decoupled, [failed]), True, monkeypatch) == (
        400, "text/event-stream; charset=utf-8", b'data: {"error":"the model failed"}\n\n')
    assert _answer(FakeCore(decoupled, [failed]), False, monkeypatch) == (
        400, "application/json", b'{"error":"the model failed"}')


def test_generate_on_a_stream_of_two_ends_it_at_the_second(monkeypatch):
    core = FakeCore(True, [_text("a"), _text("b"), ServerError(Status.INTERNAL, "never reached")])
    status, content_type, body = _answer(core, False, monkeypatch)
    assert (status, content_type) == (200, "application/json") and core.closed
    assert body == b'{"error":"generate expects model to produce exactly 1 response, use generate stream for model ' \
                   b'that generates various number of responses"}'
    core = FakeCore(True, [_text("a"), _text("b"), ServerError(Status.INTERNAL, "late")])
    assert _answer(core, True, monkeypatch)[2] == (
        b'data: {"model_name":"m","model_version":"3","text_output":"a"}\n\n'
        b'data: {"model_name":"m","model_version":"3","text_output":"b"}\n\ndata: {"error":"late"}\n\n')
