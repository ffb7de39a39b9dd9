"""Request validation against a model config, without any server: Triton's order, codes and wording."""

from __future__ import annotations

import numpy as np
import pytest

from pytriton.core.registry import parse_version
from pytriton.core.types import InferRequest, RequestedOutput
from pytriton.core.validation import drop_repeated_outputs, validate_layout, validate_request
from pytriton.exceptions import ServerError, Status
from pytriton.model_config.datatypes import serialize_bytes_tensor
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.messages import TensorData

BATCHED = TritonModelConfig(
    "simple",
    inputs=[TensorSpec("INPUT0", "INT32", (16,)), TensorSpec("INPUT1", "INT32", (16,))],
    outputs=[TensorSpec("OUTPUT0", "INT32", (16,))],
    max_batch_size=8,
)
PLAIN = TritonModelConfig(
    "plain",
    inputs=[TensorSpec("TEXT", "BYTES", (-1,)), TensorSpec("OPT", "FP32", (2, -1), optional=True)],
    outputs=[TensorSpec("OUT", "BYTES", (-1,))],
)


def tensor(name, datatype, shape, data=None):
    if data is None:
        count = int(np.prod(shape)) if shape else 1
        data = b"\0" * (4 * count)
    return TensorData(name, datatype, tuple(shape), data)


def good(batch=1, **changes):
    inputs = [tensor("INPUT0", "INT32", (batch, 16)), tensor("INPUT1", "INT32", (batch, 16))]
    return InferRequest("simple", inputs=inputs, **changes)


def error_of(config, request) -> ServerError:
    with pytest.raises(ServerError) as info:
        validate_request(config, request)
    assert info.value.status is Status.INVALID_ARG
    return info.value


def test_valid_requests_return_batch_size():
    assert validate_request(BATCHED, good(3)) == 3
    words = np.array([b"a", b"bc"], dtype=object)
    request = InferRequest("plain", inputs=[tensor("TEXT", "BYTES", (2,), serialize_bytes_tensor(words))])
    assert validate_request(PLAIN, request) == 1


def test_missing_input_message():
    request = InferRequest("simple", inputs=[tensor("INPUT0", "INT32", (1, 16))])
    assert error_of(BATCHED, request).message == (
        "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT0'], "
        "but missing required input(s) ['INPUT1']. Please provide all required input(s)."
    )


def test_missing_input_with_optional_inputs_and_request_id():
    request = InferRequest("plain", id="r7", inputs=[])
    assert error_of(PLAIN, request).message == (
        "[request id: r7] expected number of inputs between 1 and 2 but got 0 inputs for model 'plain'. "
        "Got input(s) [], but missing required input(s) ['TEXT']. Please provide all required input(s)."
    )


def test_unexpected_input_has_no_prefix():
    request = good()
    request.inputs[1] = tensor("INPUTX", "INT32", (1, 16))
    assert error_of(BATCHED, request).message == "unexpected inference input 'INPUTX' for model 'simple'"


def test_unknown_output_is_checked_first():
    request = InferRequest("simple", inputs=[], outputs=[RequestedOutput("DUMMY")])
    assert error_of(BATCHED, request).message == "unexpected inference output 'DUMMY' for model 'simple'"


def test_duplicates():
    request = good()
    request.inputs.append(tensor("INPUT0", "INT32", (1, 16)))
    assert error_of(BATCHED, request).message == "[request id: <id_unknown>] input 'INPUT0' already exists in request"


def test_an_output_asked_for_twice_is_kept_once_the_first_time_in_place():
    first, second = RequestedOutput("OUTPUT0", {"binary_data": True}), RequestedOutput("OUTPUT0")
    outputs = [first, RequestedOutput("OUTPUT1"), second]
    drop_repeated_outputs(outputs)
    assert [o.name for o in outputs] == ["OUTPUT0", "OUTPUT1"] and outputs[0] is first


def test_batch_size_limit_and_mismatch():
    assert error_of(BATCHED, good(9)).message == (
        "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'simple'"
    )
    request = good(2)
    request.inputs[1] = tensor("INPUT1", "INT32", (3, 16))
    assert error_of(BATCHED, request).message == (
        "[request id: <id_unknown>] input 'INPUT1' batch size does not match other inputs for 'simple'"
    )


def test_datatype_mismatch():
    request = good()
    request.inputs[0] = tensor("INPUT0", "FP32", (1, 16))
    assert error_of(BATCHED, request).message == (
        "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'"
    )


def test_shape_mismatch_with_batching_note():
    request = good()
    request.inputs[0] = tensor("INPUT0", "INT32", (1, 4))
    message = error_of(BATCHED, request).message
    assert message.startswith(
        "[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,4]. "
        "NOTE: Setting a non-zero max_batch_size"
    )


def test_shape_mismatch_without_batching_and_variable_dims():
    request = InferRequest("plain", inputs=[tensor("TEXT", "BYTES", (1, 2))])
    assert error_of(PLAIN, request).message == (
        "[request id: <id_unknown>] unexpected shape for input 'TEXT' for model 'plain'. Expected [-1], got [1,2]. "
    )
    request = InferRequest("plain", inputs=[tensor("TEXT", "BYTES", (-1,))])
    assert "All input dimensions should be specified for input 'TEXT'" in error_of(PLAIN, request).message
    request = InferRequest("plain", inputs=[tensor("TEXT", "BYTES", (-3,))])
    assert error_of(PLAIN, request).message == "tensor 'TEXT' contains an invalid dimension in shape [-3]"


def test_byte_size_mismatch():
    request = good()
    request.inputs[1] = tensor("INPUT1", "INT32", (1, 16), b"\0" * 128)
    assert error_of(BATCHED, request).message == (
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 128"
    )


def test_bytes_element_count():
    words = serialize_bytes_tensor(np.array([b"a", b"b", b"c"], dtype=object))
    request = InferRequest("plain", inputs=[tensor("TEXT", "BYTES", (2,), words)])
    assert error_of(PLAIN, request).message == (
        "[request id: <id_unknown>] unexpected number of string elements 3 for inference input 'TEXT' "
        "for model 'plain', expecting 2"
    )
    request = InferRequest("plain", inputs=[tensor("TEXT", "BYTES", (4,), words)])
    assert error_of(PLAIN, request).message.endswith("expected 4 string elements for inference input 'TEXT' "
                                                     "for model 'plain', got 3")
    request = InferRequest("plain", inputs=[tensor("TEXT", "BYTES", (3,), words + b"\1\0")])
    assert "incomplete string length indicator" in error_of(PLAIN, request).message
    request = InferRequest("plain", inputs=[tensor("TEXT", "BYTES", (3,), words[:-1])])  # its last element cut
    assert error_of(PLAIN, request).message == (
        "incomplete string data for inference input 'TEXT', expecting string of length 1 but only 0 bytes available"
    )


def test_zero_size_tensors_are_valid():
    request = good(0)
    request.inputs = [tensor("INPUT0", "INT32", (0, 16), b""), tensor("INPUT1", "INT32", (0, 16), b"")]
    assert validate_request(BATCHED, request) == 0


@pytest.mark.parametrize(
    "text, message",
    [
        ("x", "failed to get model version from specified version string 'x' (details: stol), "
              "version should be an integral value > 0"),
        ("-1", "invalid model version specified '-1' , version should be an integral value > 0"),
    ],
)
def test_bad_version_strings(text, message):
    with pytest.raises(ServerError) as info:
        parse_version(text)
    assert info.value.status is Status.INVALID_ARG
    assert info.value.message == message


def test_version_strings_read_like_stol():
    assert parse_version("") == -1
    assert parse_version("3") == 3
    assert parse_version(" 2") == 2
    assert parse_version("1.5") == 1


def _both(config, request, layouts):
    """What validate_request and validate_layout (with `layouts`) make of `request`: their error messages or results."""
    outcomes = []
    for check in (lambda: validate_request(config, request), lambda: validate_layout(config, request, layouts)[0]):
        try:
            outcomes.append(check())
        except ServerError as exc:
            outcomes.append((exc.status, exc.message))
    return outcomes


def test_a_remembered_layout_still_checks_each_requests_sizes():
    """validate_layout checks a layout once (then remembers its batch size and signature) and every request's data
    sizes; its answers and error messages are validate_request's, a layout seen or not."""
    layouts: dict = {}
    layout = object()
    assert validate_layout(BATCHED, good(2, layout=layout), layouts) == (
        2, (("INPUT0", "INT32", (16,)), ("INPUT1", "INT32", (16,))))
    assert list(layouts) == [layout]
    request = good(2, layout=layout)
    request.inputs[1] = tensor("INPUT1", "INT32", (2, 16), b"\0" * 64)  # half the bytes
    first, second = _both(BATCHED, request, layouts)
    assert first == second and "Expected 128, got 64" in first[1]
    assert _both(BATCHED, good(2, layout=layout), layouts) == [2, 2]

    words = serialize_bytes_tensor(np.array([b"a", b"b", b"c"], dtype=object))
    text = object()
    assert _both(PLAIN, InferRequest("plain", inputs=[tensor("TEXT", "BYTES", (3,), words)], layout=text),
                 layouts) == [1, 1]
    for data in (words[:-1] + b"\1\0", serialize_bytes_tensor(np.array([b"a", b"b"], dtype=object))):
        first, second = _both(PLAIN, InferRequest("plain", inputs=[tensor("TEXT", "BYTES", (3,), data)], layout=text),
                              layouts)
        assert first == second and first[0] is Status.INVALID_ARG


def test_a_failing_layout_is_not_remembered():
    layouts: dict = {}
    request = good(layout=object())
    request.inputs[0] = tensor("INPUT0", "FP32", (1, 16))
    first, second = _both(BATCHED, request, layouts)
    assert first == second and "data-type is 'FP32'" in first[1]
    assert not layouts
