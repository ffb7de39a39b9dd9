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
