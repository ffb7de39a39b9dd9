"""Conversions between Triton's gRPC messages and the core's types, and status mapping."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np
from tritonclient.grpc import service_pb2 as pb

from pytriton.core.types import InferRequest, InferResponse, RegionRef, RequestedOutput, Tensor
from pytriton.exceptions import ServerError, Status, invalid_arg
from pytriton.frontend.access import AccessDenied
from pytriton.frontend.grpc.wire import (
    TEMPLATE_HEAD_MAX,
    TEMPLATES,
    TEMPLATES_MAX,
    InferResponseWire,
    RequestTemplate,
    encode_varint,
)
from pytriton.model_config.datatypes import TRITON_TO_NUMPY, serialize_bytes_tensor

STATUS_TO_GRPC = {
    Status.UNKNOWN: grpc.StatusCode.UNKNOWN,
    Status.INTERNAL: grpc.StatusCode.INTERNAL,
    Status.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Status.INVALID_ARG: grpc.StatusCode.INVALID_ARGUMENT,
    Status.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Status.UNSUPPORTED: grpc.StatusCode.UNIMPLEMENTED,
    Status.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    Status.CANCELLED: grpc.StatusCode.CANCELLED,
}

ALLOWED_TRITON_PARAMS = ("triton_enable_empty_final_response",)
SHM_KEYS = ("shared_memory_region", "shared_memory_byte_size", "shared_memory_offset")

# InferTensorContents field -> (datatypes it may carry, name used in errors)
_CONTENT_FIELDS = (
    ("bool_contents", ("BOOL",), "BOOL"),
    ("int_contents", ("INT8", "INT16", "INT32"), "INT32"),
    ("int64_contents", ("INT64",), "INT64"),
    ("uint_contents", ("UINT8", "UINT16", "UINT32"), "UINT32"),
    ("uint64_contents", ("UINT64",), "UINT64"),
    ("fp32_contents", ("FP32",), "FP32"),
    ("fp64_contents", ("FP64",), "FP64"),
    ("bytes_contents", ("BYTES",), "BYTES"),
)


def param_value(param: Any) -> Any:
    kind = param.WhichOneof("parameter_choice")
    return getattr(param, kind) if kind else None


def request_parameters(request: Any) -> dict[str, Any]:
    """Request-level parameters with Triton's checks of reserved keys and value types."""
    out: dict[str, Any] = {}
    parameters = request.parameters
    for key in parameters:  # (a map's items() is a Python-level view: twice as slow)
        param = parameters[key]
        kind = param.WhichOneof("parameter_choice")
        if key == "sequence_id":
            if kind not in ("int64_param", "string_param"):
                raise invalid_arg("invalid value type for 'sequence_id' parameter, expected int64_param or string_param.")
        elif key in ("sequence_start", "sequence_end"):
            if kind != "bool_param":
                raise invalid_arg(f"invalid value type for '{key}' parameter, expected bool_param.")
        elif key == "priority":
            if kind == "int64_param":
                if param.int64_param < 0:
                    raise invalid_arg("invalid value for 'priority', expected value >= 0.")
            elif kind != "uint64_param":
                raise invalid_arg("invalid value type for 'priority' parameter, expected int64_param or uint64_param.")
        elif key == "timeout":
            if kind != "int64_param":
                raise invalid_arg("invalid value type for 'timeout' parameter, expected int64_param.")
        elif key.startswith("triton_"):
            if key not in ALLOWED_TRITON_PARAMS:
                raise invalid_arg(
                    "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys "
                    "starting with 'triton_' are allowed: " + " ".join(ALLOWED_TRITON_PARAMS)
                )
            if kind != "bool_param":
                raise invalid_arg(f"invalid value type for '{key}' parameter, expected bool_param.")
            continue
        elif kind not in ("int64_param", "bool_param", "string_param", "double_param"):
            raise invalid_arg(
                f"invalid value type for '{key}' parameter, expected int64_param, bool_param, or string_param."
            )
        out[key] = getattr(param, kind)
    return out


def _contents_to_bytes(tensor: Any, model_name: str) -> bytes:
    contents = tensor.contents
    found = None
    for field, datatypes, field_type in _CONTENT_FIELDS:
        values = getattr(contents, field)
        if not len(values):
            continue
        if found is not None:
            raise invalid_arg(
                f"unexpected explicit tensor data for input tensor '{tensor.name}' for model '{model_name}', "
                "binary data was already supplied."
            )
        if tensor.datatype not in datatypes:
            shown = field_type
            raise invalid_arg(
                f"unexpected explicit tensor data for input tensor '{tensor.name}' for model '{model_name}' "
                f"of type '{shown}', expected datatype '{tensor.datatype}'"
            )
        found = (field, values)
    if found is None:
        return b""
    field, values = found
    if field == "bytes_contents":
        array = np.empty(len(values), dtype=object)
        array[:] = list(values)
        return serialize_bytes_tensor(array)
    if field in ("int_contents", "uint_contents"):
        # INT8/INT16/UINT8/UINT16 ride in 32-bit fields: keep the low bytes of each value, as Triton does.
        wide = np.asarray(values, dtype=np.int32 if field == "int_contents" else np.uint32)
        return wide.astype(TRITON_TO_NUMPY[tensor.datatype]).tobytes()
    return np.asarray(values, dtype=TRITON_TO_NUMPY[tensor.datatype]).tobytes()


def _shm_reference(tensor: Any, kind: str) -> tuple[str, int, int] | None:
    """(region, byte size, offset) if the tensor refers to shared memory, with Triton's checks in Triton's order."""
    params = tensor.parameters
    if not any(key in params for key in SHM_KEYS):
        return None
    region = params.get("shared_memory_region")
    if region is not None and region.WhichOneof("parameter_choice") != "string_param":
        raise invalid_arg(
            f"invalid value type for 'shared_memory_region' parameter for {kind} '{tensor.name}', expected string_param."
        )
    offset = 0
    if "shared_memory_offset" in params:
        if region is None:
            raise invalid_arg(
                "'shared_memory_offset' can not be specified without 'shared_memory_region' parameter "
                f"for {kind} '{tensor.name}'"
            )
        offset = _int64_param(params, "shared_memory_offset", kind, tensor.name)
    if "shared_memory_byte_size" not in params:
        # a region without a byte size (with neither a region nor a byte size, the offset check above fired)
        raise invalid_arg(
            "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter "
            f"for {kind} '{tensor.name}'"
        )
    if region is None:
        raise invalid_arg(
            "'shared_memory_byte_size' can not be specified without 'shared_memory_region' parameter "
            f"for {kind} '{tensor.name}'"
        )
    return region.string_param, _int64_param(params, "shared_memory_byte_size", kind, tensor.name), offset


def _int64_param(params: Any, key: str, kind: str, name: str) -> int:
    param = params[key]
    if param.WhichOneof("parameter_choice") != "int64_param":
        raise invalid_arg(f"invalid value type for '{key}' parameter for {kind} '{name}', expected int64_param.")
    return int(param.int64_param)


def to_infer_request(request: Any) -> InferRequest:
    """ModelInferRequest -> InferRequest (raw contents indexed over inputs that carry data inline)."""
    raw = request.raw_input_contents
    template = getattr(request, "template", None)
    if template is not None and len(raw) >= len(template.inputs):  # (too few: the full path says which is missing)
        scanned = request.sequence_parameters  # (sequence parameters only, of the kinds Triton takes: see _wire)
        return InferRequest(
            model_name=template.model_name,
            model_version=template.model_version,
            inputs=[Tensor(name, datatype, shape, raw[index]) for index, (name, datatype, shape)
                    in enumerate(template.inputs)],
            outputs=[RequestedOutput(name) for name in template.outputs],
            parameters=scanned if scanned is not None else {},
            id=request.request_id or "",
            layout=template,  # (one template: one set of input names, datatypes and shapes, output names)
        )
    head = (getattr(request, "template_key", None) or getattr(request, "head", None)) if template is None else None
    scanned = getattr(request, "sequence_parameters", None)
    id_read = getattr(request, "request_id", None) is not None  # (then `head` holds no id)
    request = getattr(request, "header", request)  # an InferRequestView: read the protobuf fields directly
    model_name = request.model_name
    # Triton reads the request parameters before any tensor (SetInferenceRequestMetadata, then InferGRPCToInput).
    parameters = request_parameters(request) if request.parameters else {}
    # (a template is kept of a plain header, or of one whose only parameters the scan read: see _remember_template)
    plain = head is not None and (not parameters or scanned is not None)
    raw_index = 0
    inputs = []
    for tensor in request.inputs:
        shm = None
        if tensor.parameters:
            plain = False
            shm = _shm_reference(tensor, "tensor")
        if shm is not None:
            if tensor.HasField("contents"):
                raise invalid_arg(
                    f"unexpected 'content' provided when using shared memory for input tensor '{tensor.name}' "
                    f"for model '{model_name}'"
                )
            region, size, offset = shm
            inputs.append(Tensor(tensor.name, tensor.datatype, tuple(tensor.shape), region=RegionRef(region, offset, size)))
            continue
        if tensor.HasField("contents"):
            plain = False
            if len(raw):
                raise invalid_arg(
                    f"contents field must not be specified when using raw_input_contents for '{tensor.name}' "
                    f"for model '{model_name}'"
                )
            data: Any = _contents_to_bytes(tensor, model_name)
        else:
            if raw_index >= len(raw):
                raise invalid_arg(
                    f"unable to find data for input tensor '{tensor.name}' for model '{model_name}' in request."
                )
            data = raw[raw_index]
            raw_index += 1
        inputs.append(Tensor(tensor.name, tensor.datatype, tuple(tensor.shape), data))
    outputs = []
    for output in request.outputs:
        wanted: dict[str, Any] = {}  # the output's own parameters, not the request's
        if output.parameters:
            plain = False
            wanted = {k: param_value(v) for k, v in output.parameters.items()}
            shm = _shm_reference(output, "tensor")
            if shm is not None:
                if "classification" in wanted:
                    raise invalid_arg("Output can't set both 'shared_memory_region' and 'classification'")
                wanted.update(
                    shared_memory_region=shm[0], shared_memory_byte_size=shm[1], shared_memory_offset=shm[2]
                )
            elif "classification" in wanted:
                count = wanted["classification"]  # (tritonserver 2.51's words, its refusal of 0 too)
                if not isinstance(count, int) or isinstance(count, bool):
                    raise invalid_arg("invalid value type for 'classification' parameter, expected int64_param")
                if count <= 0:
                    raise invalid_arg("invalid value for 'classification' parameter, expected >= 0")
        outputs.append(RequestedOutput(output.name, wanted))
    converted = InferRequest(
        model_name=model_name,
        model_version=request.model_version,
        id=request.id,
        inputs=inputs,
        outputs=outputs,
        parameters=parameters,
    )
    if plain and head is not None and len(head) <= TEMPLATE_HEAD_MAX and (id_read or not converted.id):
        _remember_template(head, converted)
    return converted


# Serialised response headers without their id, by (model name, version, outputs' names, datatypes and shapes): a
# model answers the same header over and over. Each is (fields before `id`, fields after it), so that a response
# with an id is still serialised in field order, byte for byte what protobuf writes.
_HEADERS: dict[tuple[Any, ...], tuple[bytes, bytes]] = {}
_HEADERS_MAX = 1024
_ID_TAG = bytes([(3 << 3) | 2])


def _remember_template(head: bytes, request: InferRequest) -> None:
    """Keep the template of a plain request header (no parameters anywhere but sequence ones, no `contents`; its id
    and sequence parameters are not part of `head`: see `_wire.TEMPLATES`), taken from its conversion; other headers
    are converted in full each time."""
    if len(TEMPLATES) >= TEMPLATES_MAX:
        TEMPLATES.clear()
    TEMPLATES[head] = RequestTemplate(request.model_name, request.model_version,
                                      tuple((t.name, t.datatype, t.shape) for t in request.inputs),
                                      tuple(o.name for o in request.outputs))


def to_infer_response(response: InferResponse) -> InferResponseWire:
    """InferResponse -> ModelInferResponse on the wire: one raw_output_contents entry per output, in order
    (empty for outputs written to a client region); the output buffers are sent without copies."""
    outputs = response.outputs
    parts = [b"" if tensor.data is None else tensor.data for tensor in outputs]
    if response.parameters:
        return InferResponseWire(_response_message(response), parts, response.release)
    key = (response.model_name, response.model_version, *[(t.name, t.datatype, tuple(t.shape)) for t in outputs])
    cached = _HEADERS.get(key)
    if cached is None:
        head = pb.ModelInferResponse(model_name=response.model_name, model_version=response.model_version)
        prefix = head.SerializeToString()
        full = _response_message(response, with_id=False).SerializeToString()
        cached = (prefix, full[len(prefix):]) if full.startswith(prefix) else (b"", full)
        if len(_HEADERS) >= _HEADERS_MAX:
            _HEADERS.clear()
        _HEADERS[key] = cached
    if response.id:
        if not cached[0] and cached[1]:  # (protobuf wrote the fields in another order: no splice)
            return InferResponseWire(_response_message(response), parts, response.release)
        ident = response.id.encode()
        encoded = b"".join((cached[0], _ID_TAG, encode_varint(len(ident)), ident, cached[1]))
    else:
        encoded = cached[0] + cached[1]
    return InferResponseWire(None, parts, response.release, encoded)


def _response_message(response: InferResponse, with_id: bool = True) -> Any:
    message = pb.ModelInferResponse(model_name=response.model_name, model_version=response.model_version,
                                    id=response.id if with_id else "")
    outputs = message.outputs
    for tensor in response.outputs:
        out = outputs.add()
        out.name = tensor.name
        out.datatype = tensor.datatype
        out.shape.extend(tensor.shape)
    for key, value in response.parameters.items():
        set_param(message.parameters[key], value)
    return message


def set_param(param: Any, value: Any) -> None:
    if isinstance(value, bool):
        param.bool_param = value
    elif isinstance(value, int):
        param.int64_param = value
    elif isinstance(value, float):
        param.double_param = value
    else:
        param.string_param = str(value)


def error_status(exc: BaseException) -> tuple[grpc.StatusCode, str] | None:
    """The gRPC status (code, details) an error ends a call with; None for errors that carry none (bugs)."""
    if isinstance(exc, ServerError):
        return STATUS_TO_GRPC.get(exc.status, grpc.StatusCode.UNKNOWN), exc.message
    if isinstance(exc, AccessDenied):
        return grpc.StatusCode.UNAVAILABLE, str(exc)  # Triton's code for a restricted protocol
    return None
