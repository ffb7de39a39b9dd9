"""The shared request builder of the clients, without a server: call arguments in, tritonclient requests out."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import tritonclient.grpc
import tritonclient.grpc.aio
import tritonclient.http
import tritonclient.http.aio
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

from pytriton.client._request_builder import (
    InferCall,
    RequestBuilder,
    is_final_response,
    result_to_dict,
    stream_response,
)
from pytriton.client.exceptions import (
    PyTritonClientInferenceServerError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig

LIBS = {"grpc": tritonclient.grpc, "http": tritonclient.http, "grpc.aio": tritonclient.grpc.aio,
        "http.aio": tritonclient.http.aio}


def model(max_batch_size: int = 0, decoupled: bool = False) -> TritonModelConfig:
    return TritonModelConfig(
        model_name="m",
        inputs=[TensorSpec("A", "FP32", (-1,)), TensorSpec("B", "BYTES", (-1,))],
        outputs=[TensorSpec("OUT", "FP32", (-1,))],
        max_batch_size=max_batch_size,
        decoupled=decoupled,
    )


def builder(lib_name: str = "grpc", auth: dict[str, str] | None = None) -> RequestBuilder:
    scheme = lib_name.split(".")[0]
    return RequestBuilder(LIBS[lib_name], scheme, "m", None, auth or {})


def tensor_bytes(infer_input) -> bytes:
    """The raw bytes an InferInput will send (gRPC raw content, HTTP binary data)."""
    if hasattr(infer_input, "_get_content"):
        return infer_input._get_content()
    return infer_input._get_binary_data()


def bytes_layout(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


# ---- call arguments -------------------------------------------------------------------------------------


def test_call_needs_inputs_of_one_convention():
    with pytest.raises(PyTritonClientValueError, match=r"Provide input data: model m has inputs \['A', 'B'\]"):
        InferCall.from_arguments((), {}, None, None).for_sample(model(0))
    with pytest.raises(PyTritonClientValueError, match="Provide input data"):
        InferCall.from_arguments((), {}, None, None).for_batch(model(4))
    with pytest.raises(PyTritonClientValueError, match="either positional either keyword"):
        InferCall.from_arguments((np.zeros(1),), {"B": np.zeros(1)}, None, None)
    positional = InferCall.from_arguments((1, 2), {}, None, None)
    named = InferCall.from_arguments((), {"A": 1}, None, None)
    assert positional.inputs == (1, 2) and named.inputs == {"A": 1}


def test_a_model_without_inputs_takes_a_call_without_inputs():
    no_inputs = TritonModelConfig(model_name="answer", inputs=[], outputs=[TensorSpec("ANSWER", "INT32", (1,))])
    call = InferCall.from_arguments((), {}, None, None)
    assert call.for_sample(no_inputs) is call and not call.inputs


@pytest.mark.parametrize(
    "parameters, headers, message",
    [
        ([("a", 1)], None, "parameters must be a dictionary, got list"),
        ({1: "a"}, None, "parameters keys must be strings, got 1"),
        ({"a": [1]}, None, "parameters values must be str, int, float or bool; 'a' is list"),
        (None, "x-a: 1", "headers must be a dictionary, got str"),
        (None, {"x-a": None}, "headers values must be str, int, float or bool; 'x-a' is NoneType"),
    ],
)
def test_parameters_and_headers_are_checked(parameters, headers, message):
    with pytest.raises(PyTritonClientValueError) as raised:
        InferCall.from_arguments((), {"A": np.zeros(1)}, parameters, headers)
    assert raised.value.message == message


def test_valid_parameters_and_headers_pass():
    call = InferCall.from_arguments((), {"A": 1}, {"s": "x", "i": 1, "f": 0.5, "b": True}, {"x-h": 2})
    assert call.parameters == {"s": "x", "i": 1, "f": 0.5, "b": True} and call.headers == {"x-h": 2}


def test_sample_of_a_batching_model_gets_and_loses_the_batch_axis():
    call = InferCall.from_arguments((), {"A": np.arange(3, dtype=np.float32)}, None, None).for_sample(model(4))
    assert call.unbatch and call.inputs["A"].shape == (1, 3)
    outputs = call.outputs({"OUT": np.arange(6).reshape(1, 6)})
    assert outputs["OUT"].shape == (6,)
    positional = InferCall.from_arguments((np.zeros(2, np.float32), [b"a"]), {}, None, None).for_sample(model(4))
    assert [array.shape for array in positional.inputs] == [(1, 2), (1, 1)]


def test_sample_of_a_non_batching_model_is_unchanged():
    call = InferCall.from_arguments((), {"A": np.zeros(3, np.float32)}, None, None)
    assert call.for_sample(model(0)) is call
    assert call.outputs({"OUT": np.zeros((1, 2))})["OUT"].shape == (1, 2)


def test_batch_needs_a_batching_model():
    call = InferCall.from_arguments((), {"A": np.zeros((2, 3), np.float32)}, None, None)
    assert call.for_batch(model(4)) is call
    with pytest.raises(PyTritonClientModelDoesntSupportBatchingError, match="Model m doesn't support batching"):
        call.for_batch(model(0))


def test_batch_axis_names_positional_inputs_in_errors():
    with pytest.raises(PyTritonClientValueError, match="'B' input"):
        InferCall.from_arguments((np.zeros(1, np.float32), np.array(["text"])), {}, None, None).for_sample(model(4))
    with pytest.raises(PyTritonClientValueError, match="Unicode inputs are not supported"):  # beyond the inputs
        InferCall.from_arguments((1.0, b"a", np.array(["x"])), {}, None, None).for_sample(model(4))


# ---- InferInput lists -----------------------------------------------------------------------------------


@pytest.mark.parametrize("lib_name", list(LIBS))
def test_infer_inputs_carry_names_datatypes_shapes_and_bytes(lib_name):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([[b"x"], [b"yz"]], dtype=object)
    infer_inputs = builder(lib_name).infer_inputs(model(4), (a, b))  # positional: the model's input order
    assert [i.name() for i in infer_inputs] == ["A", "B"]
    assert [i.datatype() for i in infer_inputs] == ["FP32", "BYTES"]
    assert [list(i.shape()) for i in infer_inputs] == [[2, 3], [2, 1]]
    assert tensor_bytes(infer_inputs[0]) == a.tobytes()
    assert tensor_bytes(infer_inputs[1]) == bytes_layout([b"x", b"yz"])


@pytest.mark.parametrize(
    "data, datatype",
    [
        (np.array([True, False]), "BOOL"),
        (np.array([1, 2], dtype=np.int64), "INT64"),
        (np.array([1, 2], dtype=np.uint8), "UINT8"),
        (np.array([1.5], dtype=np.float16), "FP16"),
        (np.array([b"ab", b"c"]), "BYTES"),  # fixed-width bytes
        ([1.0, 2.0], "FP64"),  # lists become arrays
    ],
)
def test_infer_input_datatypes(data, datatype):
    (infer_input,) = builder("http").infer_inputs(model(), {"X": data})
    assert infer_input.name() == "X" and infer_input.datatype() == datatype


@pytest.mark.parametrize(
    "inputs, message",
    [
        ({"A": np.array(["text"])}, "Unicode inputs are not supported. Encode numpy array for 'A' input"),
        ({"B": np.array([b"a", "b"], dtype=object)}, "Numpy array for 'B' input with dtype=object should contain"),
        ({"C": np.zeros(1, dtype=np.complex64)}, "Input 'C': numpy dtype complex64 has no Triton datatype"),
        ((1, 2, 3), "Model m has 2 inputs ['A', 'B']; 3 positional inputs given"),
    ],
)
def test_invalid_inputs_name_what_is_wrong(inputs, message):
    with pytest.raises(PyTritonClientValueError) as raised:
        builder().infer_inputs(model(), inputs)
    assert raised.value.message.startswith(message)


# ---- requests -------------------------------------------------------------------------------------------


def test_infer_request_over_grpc():
    requests = builder("grpc", auth={"triton-grpc-protocol-triton-access-token": "t"})
    call = InferCall.from_arguments((), {"A": np.zeros(2, np.float32)}, {"p": 1}, {"x-h": 5})
    first = requests.infer_request(model(), call, 7.5)
    second = requests.infer_request(model(), call, 7.5)
    assert set(first) == {"model_name", "inputs", "model_version", "request_id", "parameters", "headers",
                          "client_timeout"}
    assert (first["model_name"], first["model_version"], first["client_timeout"]) == ("m", "", 7.5)
    assert (first["request_id"], second["request_id"]) == ("0", "1")
    assert first["parameters"] == {"p": 1} and first["parameters"] is not call.parameters
    assert first["headers"] == {"triton-grpc-protocol-triton-access-token": "t", "x-h": "5"}
    assert [i.name() for i in first["inputs"]] == ["A"]


def test_infer_request_over_http():
    requests = RequestBuilder(tritonclient.http, "http", "m", 3, {})
    request = requests.infer_request(model(), InferCall.from_arguments((), {"A": 1.0}, None, None), 1.0)
    assert "client_timeout" not in request  # the HTTP client's own network timeout applies
    assert (request["model_version"], request["parameters"], request["headers"]) == ("3", None, None)


def test_infer_request_refuses_decoupled_models():
    call = InferCall.from_arguments((), {"A": 1.0}, None, None)
    with pytest.raises(PyTritonClientInferenceServerError, match="Model m config is decoupled"):
        builder().infer_request(model(decoupled=True), call, 1.0)


def test_stream_request_leaves_headers_to_the_stream():
    requests = builder("grpc.aio", auth={"k": "v"})
    request = requests.stream_request(model(decoupled=True), InferCall.from_arguments((1.0,), {}, None, {"x": 1}))
    assert set(request) == {"model_name", "inputs", "model_version", "request_id", "parameters"}
    assert requests.headers({"x": 1}) == {"k": "v", "x": "1"}
    assert requests.headers(None) == {"k": "v"} and builder().headers(None) is None


# ---- results --------------------------------------------------------------------------------------------


def grpc_result(final: bool | None = None, **outputs: np.ndarray) -> tritonclient.grpc.InferResult:
    response = service_pb2.ModelInferResponse(model_name="m", id="0")
    for name, data in outputs.items():
        tensor = response.outputs.add(name=name, datatype="FP32", shape=list(data.shape))
        assert tensor.name == name
        response.raw_output_contents.append(data.astype(np.float32).tobytes())
    if final is not None:
        response.parameters["triton_final_response"].bool_param = final
    return tritonclient.grpc.InferResult(response)


def http_result(**outputs: np.ndarray) -> tritonclient.http.InferResult:
    import json

    header = {"model_name": "m", "outputs": [
        {"name": name, "datatype": "FP32", "shape": list(data.shape),
         "parameters": {"binary_data_size": data.nbytes}}
        for name, data in outputs.items()
    ]}
    head = json.dumps(header).encode()
    body = head + b"".join(data.astype(np.float32).tobytes() for data in outputs.values())
    return tritonclient.http.InferResult.from_response_body(body, header_length=len(head))


def test_result_to_dict_reads_every_output():
    a, b = np.arange(4, dtype=np.float32).reshape(2, 2), np.ones(3, dtype=np.float32)
    for result in (grpc_result(X=a, Y=b), http_result(X=a, Y=b)):
        outputs = result_to_dict(result)
        assert list(outputs) == ["X", "Y"]
        np.testing.assert_array_equal(outputs["X"], a)
        np.testing.assert_array_equal(outputs["Y"], b)
    assert result_to_dict(None) == {}


def test_final_response_detection():
    assert is_final_response(grpc_result(final=True))
    assert not is_final_response(grpc_result(final=False, X=np.zeros(1)))
    assert not is_final_response(grpc_result())
    assert not is_final_response(None)
    outputs, final = stream_response(grpc_result(final=True, X=np.ones(2)), None)
    assert final and list(outputs) == ["X"]
    assert stream_response(grpc_result(final=True), None) == ({}, True)


@pytest.mark.parametrize(
    "error, expected, message",
    [
        (InferenceServerException("boom"), PyTritonClientInferenceServerError,
         "Error occurred during inference request. Message: boom"),
        (InferenceServerException("Request for unknown model: 'x' is not found"),
         PyTritonClientModelUnavailableError, "Model is unavailable: Request for unknown model: 'x' is not found"),
        (InferenceServerException("Deadline Exceeded", status="StatusCode.DEADLINE_EXCEEDED"),
         PyTritonClientTimeoutError, "Timeout occurred during inference request: Deadline Exceeded"),
    ],
)
def test_stream_errors_become_client_errors(error, expected, message):
    with pytest.raises(expected) as raised:
        stream_response(None, error)
    assert raised.value.message == message
