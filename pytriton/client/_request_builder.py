"""The request builder every model client shares: call arguments in, tritonclient requests out, results back.

It checks inputs, parameters and headers, adds and removes the batch axis, builds the tritonclient
`InferInput` list, numbers requests and reads results (outputs as a dict, the final-response flag of a
stream). It makes no network call, so the sync, asyncio, futures and decoupled layers stay thin and it can
be checked without a server.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
from tritonclient.utils import np_to_triton_dtype

from pytriton.client._errors import convert_server_error
from pytriton.client._readiness import version
from pytriton.client.exceptions import (
    PyTritonClientInferenceServerError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from pytriton.model_config.triton_model_config import TritonModelConfig

ParamsOrHeaders = dict[str, str | int | bool] | None
Outputs = dict[str, np.ndarray]


def verify_parameters(values: Any, what: str = "parameters") -> None:
    """Parameters (or headers) must be a mapping of str to str, int, float or bool."""
    if values is None:
        return
    if not isinstance(values, Mapping):
        raise PyTritonClientValueError(f"{what} must be a dictionary, got {type(values).__name__}")
    for key, value in values.items():
        if not isinstance(key, str):
            raise PyTritonClientValueError(f"{what} keys must be strings, got {key!r}")
        if not isinstance(value, (str, int, float, bool)):
            raise PyTritonClientValueError(
                f"{what} values must be str, int, float or bool; {key!r} is {type(value).__name__}"
            )


def as_array(name: str, data: Any) -> np.ndarray:
    """Input `name` as a numpy array; unicode arrays and object arrays of anything but bytes are refused."""
    array = data if isinstance(data, np.ndarray) else np.asarray(data)
    if array.dtype.kind == "U":
        raise PyTritonClientValueError(
            f"Unicode inputs are not supported. Encode numpy array for {name!r} input "
            "(ex. with np.char.encode(array, 'utf-8'))."
        )
    if array.dtype == object:
        for element in array.flat:
            if not isinstance(element, bytes):
                raise PyTritonClientValueError(
                    f"Numpy array for {name!r} input with dtype=object should contain encoded strings "
                    f"(e.g. into utf-8). Element type: {type(element)}"
                )
    return array


def _add_batch_axis(
    model_config: TritonModelConfig, inputs: tuple[Any, ...] | dict[str, Any]
) -> tuple[Any, ...] | dict[str, Any]:
    if isinstance(inputs, dict):
        return {name: as_array(name, data)[np.newaxis, ...] for name, data in inputs.items()}
    names = [spec.name for spec in model_config.inputs] + [f"#{i}" for i in range(len(inputs))]
    return tuple(as_array(names[i], data)[np.newaxis, ...] for i, data in enumerate(inputs))


def _named_inputs(model_config: TritonModelConfig, inputs: tuple[Any, ...] | dict[str, Any]) -> dict[str, Any]:
    if isinstance(inputs, dict):
        return inputs
    specs = model_config.inputs
    if len(inputs) > len(specs):
        names = [spec.name for spec in specs]
        raise PyTritonClientValueError(
            f"Model {model_config.model_name} has {len(specs)} inputs {names}; {len(inputs)} positional inputs given"
        )
    return {spec.name: data for spec, data in zip(specs, inputs)}


class InferCall(NamedTuple):
    """The checked arguments of one `infer_sample` / `infer_batch` call.

    `inputs` is a tuple (positional, in the model's input order) or a dict (by name); `unbatch` says that the
    batch axis was added here and comes off the outputs again.
    """

    inputs: tuple[Any, ...] | dict[str, Any]
    parameters: ParamsOrHeaders = None
    headers: ParamsOrHeaders = None
    unbatch: bool = False

    @classmethod
    def from_arguments(
        cls,
        inputs: tuple[Any, ...],
        named_inputs: dict[str, Any],
        parameters: ParamsOrHeaders,
        headers: ParamsOrHeaders,
    ) -> InferCall:
        """Check the arguments of a call: inputs either positional or named, and valid parameters and headers.

        A call without inputs is checked against the model's configuration (`for_sample` / `for_batch`): only a
        model declared without inputs takes one.
        """
        if inputs and named_inputs:
            raise PyTritonClientValueError("Use either positional either keyword method arguments convention")
        verify_parameters(parameters, "parameters")
        verify_parameters(headers, "headers")
        return cls(inputs or named_inputs, parameters, headers)

    def for_sample(self, model_config: TritonModelConfig) -> InferCall:
        """The call of one sample: for a batching model the batch axis is added (and later removed)."""
        self._check_has_inputs(model_config)
        if model_config.max_batch_size <= 0:
            return self
        return InferCall(_add_batch_axis(model_config, self.inputs), self.parameters, self.headers, unbatch=True)

    def for_batch(self, model_config: TritonModelConfig) -> InferCall:
        """The call of a batch; the model must batch."""
        self._check_has_inputs(model_config)
        if model_config.max_batch_size <= 0:
            raise PyTritonClientModelDoesntSupportBatchingError(
                f"Model {model_config.model_name} doesn't support batching - use infer_sample method instead"
            )
        return self

    def _check_has_inputs(self, model_config: TritonModelConfig) -> None:
        if not self.inputs and model_config.inputs:
            names = [spec.name for spec in model_config.inputs]
            raise PyTritonClientValueError(f"Provide input data: model {model_config.model_name} has inputs {names}")

    def outputs(self, result: Outputs) -> Outputs:
        """The outputs as the caller expects them (without the batch axis added for a sample)."""
        return {name: data[0] for name, data in result.items()} if self.unbatch else result


class RequestBuilder:
    """Builds the tritonclient requests of one model client: inputs, request ids, parameters, headers."""

    def __init__(
        self, lib: ModuleType, scheme: str, model_name: str, model_version: str | None, auth_headers: dict[str, str]
    ):
        """Requests for `model_name` / `model_version` with `lib`'s InferInput; `auth_headers` go with each."""
        self._lib = lib
        self._scheme = scheme
        self._model_name = model_name
        self._model_version = version(model_version)
        self._auth_headers = dict(auth_headers)
        self._request_ids = itertools.count(0)

    def next_request_id(self) -> str:
        """"0", "1", ... in the order requests are built."""
        return str(next(self._request_ids))

    def headers(self, headers: ParamsOrHeaders) -> dict[str, str] | None:
        """The access-token headers with the call's headers (values as strings); None when there are none."""
        merged = dict(self._auth_headers)
        for key, value in (headers or {}).items():
            merged[key] = str(value)
        return merged or None

    def infer_inputs(self, model_config: TritonModelConfig, inputs: tuple[Any, ...] | dict[str, Any]) -> list[Any]:
        """The tritonclient `InferInput`s of `inputs` (positional ones named after the model's inputs)."""
        infer_inputs = []
        for name, data in _named_inputs(model_config, inputs).items():
            array = as_array(name, data)
            datatype = np_to_triton_dtype(array.dtype)
            if datatype is None:
                raise PyTritonClientValueError(f"Input {name!r}: numpy dtype {array.dtype} has no Triton datatype")
            infer_input = self._lib.InferInput(name, list(array.shape), datatype)
            infer_input.set_data_from_numpy(array)
            infer_inputs.append(infer_input)
        return infer_inputs

    def stream_request(self, model_config: TritonModelConfig, call: InferCall) -> dict[str, Any]:
        """The request of a streamed call: keyword arguments of `async_stream_infer`, an item of `stream_infer`."""
        return {
            "model_name": self._model_name,
            "inputs": self.infer_inputs(model_config, call.inputs),
            "model_version": self._model_version,
            "request_id": self.next_request_id(),
            "parameters": dict(call.parameters) if call.parameters else None,
        }

    def infer_request(self, model_config: TritonModelConfig, call: InferCall, timeout_s: float) -> dict[str, Any]:
        """Keyword arguments of `infer` for `call` (gRPC: with `timeout_s` as the deadline).

        Raises:
            PyTritonClientInferenceServerError: the model is decoupled (it needs a decoupled client).
        """
        if model_config.decoupled:
            raise PyTritonClientInferenceServerError(
                f"Model {model_config.model_name} config is decoupled. Use DecoupledModelClient instead."
            )
        request = self.stream_request(model_config, call)
        request["headers"] = self.headers(call.headers)
        if self._scheme == "grpc":
            request["client_timeout"] = timeout_s
        return request


def result_to_dict(result: Any) -> Outputs:
    """The outputs of a tritonclient InferResult (HTTP or gRPC) by name; {} for None."""
    if result is None:
        return {}
    response = result.get_response()
    if isinstance(response, dict):  # HTTP
        names = [output["name"] for output in response.get("outputs", [])]
    else:  # gRPC ModelInferResponse
        names = [output.name for output in response.outputs]
    return {name: result.as_numpy(name) for name in names}


def is_final_response(result: Any) -> bool:
    """Whether a streamed response carries `triton_final_response` = true."""
    if result is None:
        return False
    parameters = result.get_response().parameters
    return "triton_final_response" in parameters and parameters["triton_final_response"].bool_param


def stream_response(result: Any, error: BaseException | None) -> tuple[Outputs, bool]:
    """One item of a response stream: its outputs ({} for none) and whether it is the last; errors raise."""
    if error is not None:
        raise convert_server_error(error, "inference request")
    return result_to_dict(result), is_final_response(result)


def infer_timeout_error(timeout_s: float, cause: BaseException | None = None) -> PyTritonClientTimeoutError:
    """The error of an inference that did not finish within `timeout_s` (`cause`: the client's own error)."""
    detail = "" if cause is None else f" ({cause!r})"
    return PyTritonClientTimeoutError(f"Timeout occurred during inference request. Timeout: {timeout_s} s{detail}")


def stream_timeout_error(timeout_s: float) -> PyTritonClientTimeoutError:
    """The error of a stream that gave no response within `timeout_s`."""
    return PyTritonClientTimeoutError(
        f"Timeout occurred during inference request: no response within {timeout_s} s"
    )
