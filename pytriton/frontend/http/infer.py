"""Triton's HTTP/REST inference format <-> the core's types: JSON and the binary tensor extension."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import orjson

from pytriton.core.types import InferRequest, InferResponse, RegionRef, RequestedOutput, Tensor
from pytriton.exceptions import ServerError, Status, internal, invalid_arg, unsupported
from pytriton.model_config.datatypes import ITEMSIZE, TRITON_TO_NUMPY, deserialize_bytes_tensor, serialize_bytes_tensor

RESERVED_PARAMS = ("sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "binary_data_output")
_UNSIGNED_PARAMS = ("priority", "timeout")  # request parameters Triton reads as unsigned 64-bit integers
SHM_KEYS = ("shared_memory_region", "shared_memory_byte_size", "shared_memory_offset")


def _bad(message: str) -> ServerError:
    return invalid_arg(message)


def _parse_json(buffer: Any) -> Any:
    try:
        return orjson.loads(buffer)
    except orjson.JSONDecodeError as exc:
        raise _bad(f"failed to parse the request JSON buffer: {exc}") from None


def _shape(value: Any, name: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in value):
        raise _bad(f"Unable to parse 'shape' of input '{name}': expected an array of unsigned integers")
    for d in value:
        if d < 0:
            raise _bad(f"Unable to parse 'shape' of input '{name}': dimension {d} is negative")
        if d >= 1 << 63:
            raise _bad(f"Unable to parse 'shape' of input '{name}': dimension {d} is too large")
    return tuple(value)


def _params(obj: dict[str, Any], where: str) -> dict[str, Any]:
    params = obj.get("parameters", {})
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise _bad(f"Unable to parse 'parameters' of {where}: expected a JSON object")
    return params


def _request_params(params: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key.startswith("triton_"):
            raise _bad("parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.")
        if key == "binary_data_output":
            continue
        if key in _UNSIGNED_PARAMS and (type(value) is not int or not 0 <= value < 1 << 64):  # (Triton's check)
            raise internal(f"Unable to parse '{key}': attempt to access JSON non-unsigned-integer as unsigned-integer")
        # as tritonserver 2.51 reads them (a 400 with its reason, its answer a 500): an id is an unsigned 64-bit
        # integer or a string, the flags booleans
        if key == "sequence_id" and not (type(value) is int and 0 <= value < 1 << 64 or isinstance(value, str)):
            raise _bad(f"Unable to parse '{key}': attempt to access JSON non-string as string")
        if key in ("sequence_start", "sequence_end") and not isinstance(value, bool):
            raise _bad(f"Unable to parse '{key}': attempt to access JSON non-boolean as boolean")
        if not isinstance(value, (bool, int, float, str)):
            raise _bad(f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'.")
        out[key] = value
    return out


def _shm_params(params: dict[str, Any], name: str) -> tuple[str, int, int]:
    """(region, byte size, offset) of a tensor in shared memory, with Triton's parameter checks."""
    region = params.get("shared_memory_region")
    if not isinstance(region, str):
        raise _bad(f"invalid value type for 'shared_memory_region' parameter for tensor '{name}', expected string.")
    if "shared_memory_byte_size" not in params:
        raise _bad(
            f"'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor "
            f"'{name}'"
        )
    values = []
    for key, default in (("shared_memory_byte_size", None), ("shared_memory_offset", 0)):
        value = params.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _bad(f"Unable to parse '{key}' of tensor '{name}': expected an unsigned integer")
        values.append(value)
    return region, values[0], values[1]


# What the elements of a JSON `data` array may be, by datatype (Python's JSON types: a JSON true is a `bool`, not an
# `int`), and the words of tritonserver's refusal of another (its TritonJson's). A number where a BOOL is due, a
# boolean, a string or a fraction where an integer is, are refused as Triton refuses them, never converted.
_NON_INTEGER = "attempt to access JSON non-signed-integer as signed-integer"
_NON_UNSIGNED = "attempt to access JSON non-unsigned-integer as unsigned-integer"
JSON_ELEMENTS: dict[str, tuple[frozenset[type], str]] = {
    "BOOL": (frozenset({bool}), "attempt to access JSON non-boolean as boolean"),
    **{t: (frozenset({int}), _NON_UNSIGNED) for t in ("UINT8", "UINT16", "UINT32", "UINT64")},
    **{t: (frozenset({int}), _NON_INTEGER) for t in ("INT8", "INT16", "INT32", "INT64")},
    **{t: (frozenset({int, float}), "attempt to access JSON non-number as double") for t in ("FP32", "FP64")},
}


def _count_mismatch() -> ServerError:
    """More or fewer elements in `data` than its shape holds (tritonserver 2.51's words and status)."""
    return internal("Unable to parse 'data': Shape does not match true shape of 'data' field")


def _json_data_to_bytes(data: Any, datatype: str, shape: tuple[int, ...], name: str) -> bytes:
    count = 1
    for d in shape:
        count *= d
    if datatype in ("FP16", "BF16"):
        raise _bad(f"receiving {datatype} data via JSON is not supported. Please use the binary data format for input {name}")
    if not isinstance(data, list):
        raise _bad(f"Unable to parse 'data' of input '{name}': attempt to access JSON non-array as array")
    if datatype == "BYTES":
        # Like Triton, the size comes from the elements themselves: a wrong count is left to the core's
        # BYTES checks ("unexpected number of string elements ..." / "expected N string elements ...").
        flat = flatten(data)
        array = np.empty(len(flat), dtype=object)
        for i, item in enumerate(flat):
            if not isinstance(item, str):
                raise _bad(f"Unable to parse 'data' of input '{name}': attempt to access JSON non-string as string")
            array[i] = item.encode("utf-8")
        return serialize_bytes_tensor(array)
    dtype = TRITON_TO_NUMPY.get(datatype)
    kinds = JSON_ELEMENTS.get(datatype)
    if dtype is None or kinds is None:
        raise _bad(f"invalid datatype for input {name}")
    elements = data
    types = set(map(type, elements))
    if list in types:  # nested arrays, read in order
        elements = flatten(data)
        types = set(map(type, elements))
    allowed, refusal = kinds
    # In Triton's order: element by element, one past the shape's count is a count error, else a wrong type is
    # refused (Triton 2.51 answers both with 500; a wrong type is the client's error here: 400).
    if not types <= allowed:
        first = next(i for i, value in enumerate(elements) if type(value) not in allowed)
        if first >= count:
            raise _count_mismatch()
        raise _bad(f"Unable to parse 'data' of input '{name}': {refusal}")
    if len(elements) != count:
        raise _count_mismatch()
    if datatype[0] in "IU" and elements:  # integers: in the datatype's range, or refused (Triton wraps them
        # around: 300 as INT8 would be 44)
        limits = np.iinfo(dtype)
        low, high = min(elements), max(elements)
        if low < limits.min or high > limits.max:
            if datatype.startswith("U") and low < 0:
                raise _bad(f"Unable to parse 'data' of input '{name}': {_NON_UNSIGNED}")
            value = low if low < limits.min else high
            raise _bad(f"Unable to parse 'data' of input '{name}': {value} is out of the range of {datatype} "
                       f"[{limits.min}, {limits.max}]")
    return np.asarray(elements, dtype=dtype).tobytes()


def flatten(data: Any) -> list[Any]:
    """The values of a JSON value, nested arrays read in order."""
    if not isinstance(data, list):
        return [data]
    out: list[Any] = []
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            out.append(item)
        else:
            stack.pop()
    return out


def raw_input_of(config: Any, body_size: int) -> tuple[str, str, tuple[int, ...]]:
    """Deduce the single input of a raw binary request (`Inference-Header-Content-Length: 0`).

    Messages as Triton core's `InferenceRequest::Normalize` (so with the request-id prefix).
    """
    prefix = "[request id: <id_unknown>] "
    if len(config.inputs) != 1:
        raise invalid_arg(
            f"{prefix}Raw request must only have 1 input (found 1) to be deduced but got {len(config.inputs)} "
            f"inputs in '{config.model_name}' model configuration"
        )
    spec = config.inputs[0]
    lead = (1,) if config.batching else ()
    variable = [i for i, d in enumerate(spec.shape) if d == -1]
    if len(variable) > 1:
        raise invalid_arg(
            f"{prefix}The shape of the raw input '{spec.name}' can not be deduced because there are more than "
            "one variable-sized dimension"
        )
    if spec.datatype == "BYTES":
        count = 1
        for d in spec.shape:
            count *= d
        if variable or count != 1:  # Triton: no variable dim and exactly one element
            raise invalid_arg(
                f"{prefix}For BYTE datatype raw input '{spec.name}', the model must have input shape [1]"
            )
        return spec.name, spec.datatype, lead + tuple(spec.shape)
    shape = list(spec.shape)
    if variable:
        fixed = ITEMSIZE[spec.datatype]
        for d in shape:
            if d != -1:
                fixed *= d
        if fixed == 0 or body_size % fixed:
            raise invalid_arg(
                f"{prefix}The shape of the raw input '{spec.name}' can not be deduced from {body_size} bytes of "
                "data"
            )
        shape[variable[0]] = body_size // fixed
    return spec.name, spec.datatype, lead + tuple(shape)


def parse_infer_request(
    model_name: str,
    version: str,
    body: bytes,
    header_length: int | None,
    raw_input: tuple[str, str, tuple[Any, ...]] | None,
) -> tuple[InferRequest, bool]:
    """Decode an HTTP infer body; return the request and whether outputs default to binary.

    `raw_input` (name, datatype, shape) is given for `Inference-Header-Content-Length: 0` requests, whose
    whole body is the data of the model's single input.
    """
    size = len(body)
    if header_length == 0:
        assert raw_input is not None
        raw_name, raw_datatype, raw_shape = raw_input
        raw_data: Any = body
        if raw_datatype == "BYTES":  # the whole body is the one element; Triton prepends its length
            raw_data = struct.pack("<I", size) + body
        return (
            InferRequest(model_name, version, "", [Tensor(raw_name, raw_datatype, raw_shape, raw_data)], [], {}),
            True,
        )
    header: Any
    if header_length is None:
        header, binary = body, memoryview(b"")
    else:
        if header_length < 0 or header_length > size:
            raise _bad(f"inference header size should be in range (0, {size}), got: {header_length}")
        view = memoryview(body)
        header, binary = view[:header_length], view[header_length:]
    obj = _parse_json(header)
    if not isinstance(obj, dict):
        raise _bad("failed to parse the request JSON buffer: expected a JSON object")
    request_id = obj.get("id", "")
    if not isinstance(request_id, str):
        raise _bad("Unable to parse 'id': expected a string")
    params = _params(obj, "the request")
    binary_default = params.get("binary_data_output", False)
    if not isinstance(binary_default, bool):
        raise _bad("Unable to parse 'binary_data_output': expected a boolean")
    raw_inputs = obj.get("inputs", [])
    if not isinstance(raw_inputs, list):
        raise _bad("Unable to parse 'inputs': expected an array")
    inputs = []
    offset = 0
    for entry in raw_inputs:
        if not isinstance(entry, dict):
            raise _bad("Unable to parse 'inputs': expected an array of objects")
        name = entry.get("name")
        datatype = entry.get("datatype")
        if not isinstance(name, str):
            raise _bad("Unable to parse 'name' of an input: expected a string")
        if not isinstance(datatype, str):
            raise _bad(f"Unable to parse 'datatype' of input '{name}': expected a string")
        shape = _shape(entry.get("shape"), name)
        tparams = _params(entry, f"input '{name}'")
        has_data = "data" in entry
        has_binary = "binary_data_size" in tparams
        has_shm = "shared_memory_region" in tparams
        if has_data + has_binary + has_shm != 1:
            got = "".join(f" {n}" for n, on in (("'data'", has_data), ("'binary_data_size'", has_binary),
                                                 ("'shared_memory_region'", has_shm)) if on)
            raise _bad(
                "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
                "'shared_memory_region' in 'parameters'. But" + (f" set{got}" if has_data + has_binary + has_shm
                                                                   else " no field is set")
            )
        if has_shm:
            region, size, region_offset = _shm_params(tparams, name)
            inputs.append(Tensor(name, datatype, shape, region=RegionRef(region, region_offset, size)))
            continue
        if has_binary:
            nbytes = tparams["binary_data_size"]
            if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
                raise _bad(f"Unable to parse 'binary_data_size' of input '{name}': expected an unsigned integer")
            if offset + nbytes > len(binary):
                raise _bad(
                    f"unexpected size for input '{name}', expecting {nbytes - (len(binary) - offset)} "
                    f"additional bytes for model '{model_name}'"
                )
            data: Any = binary[offset : offset + nbytes]
            offset += nbytes
        else:
            data = _json_data_to_bytes(entry["data"], datatype, shape, name)
        inputs.append(Tensor(name, datatype, shape, data))
    if offset != len(binary):
        raise _bad(f"unexpected additional input data for model '{model_name}'")
    outputs = []
    raw_outputs = obj.get("outputs", [])
    if not isinstance(raw_outputs, list):
        raise _bad("Unable to parse 'outputs': expected an array")
    for entry in raw_outputs:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _bad("Unable to parse 'outputs': expected objects with a 'name'")
        oparams = _params(entry, f"output '{entry['name']}'")
        if "shared_memory_region" in oparams:
            if oparams.get("binary_data"):
                raise _bad("Output can't set both 'shared_memory_region' and 'binary_data'")
            if "classification" in oparams:
                raise _bad("Output can't set both 'shared_memory_region' and 'classification'")
            region, size, region_offset = _shm_params(oparams, entry["name"])
            oparams = dict(oparams, shared_memory_region=region, shared_memory_byte_size=size,
                           shared_memory_offset=region_offset)
        if "binary_data" in oparams and not isinstance(oparams["binary_data"], bool):
            raise _bad(f"Unable to parse 'binary_data' of output '{entry['name']}': expected a boolean")
        if "classification" in oparams:
            count = oparams["classification"]
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:  # (a 400 with Triton's reason)
                raise _bad(f"Unable to set 'classification' of output '{entry['name']}': {_NON_UNSIGNED}")
            if count == 0:  # as tritonserver 2.51: no classification, the output as it is
                oparams = {k: v for k, v in oparams.items() if k != "classification"}
        outputs.append(RequestedOutput(entry["name"], oparams))
    request = InferRequest(model_name, version, request_id, inputs, outputs, _request_params(params))
    return request, binary_default


def json_values(tensor: Tensor) -> list[Any]:
    if tensor.datatype in ("FP16", "BF16"):
        raise invalid_arg(
            f"sending {tensor.datatype} data via JSON is not supported. Please use the binary data format for output"
        )
    if tensor.datatype == "BYTES":
        values = deserialize_bytes_tensor(tensor.data).tolist()
        try:
            return [v.decode("utf-8") if isinstance(v, bytes) else v for v in values]
        except UnicodeDecodeError:  # JSON strings are text: say so instead of failing to serialize
            raise invalid_arg(
                f"output '{tensor.name}' holds BYTES elements that are not valid UTF-8 and can not be sent via "
                "JSON. Please use the binary data format for output"
            ) from None
    if tensor.data is None:
        return []
    array: np.ndarray = np.frombuffer(tensor.data, dtype=TRITON_TO_NUMPY[tensor.datatype])
    return array.tolist() if len(array) else []


def non_finite(tensor: Tensor) -> bool:
    """Whether a float output holds NaN or an infinity (which `json_text` writes)."""
    if tensor.datatype not in ("FP32", "FP64") or tensor.data is None:
        return False
    return not bool(np.isfinite(np.frombuffer(tensor.data, dtype=TRITON_TO_NUMPY[tensor.datatype])).all())


def json_text(value: Any) -> orjson.Fragment:
    """`value` (numbers, or a list of them) as JSON text with NaN and the infinities written as tritonserver writes
    them, `NaN`, `Infinity`, `-Infinity` (not JSON's grammar, which has no such numbers; Python's json, tritonclient
    and RapidJSON read them back), where orjson would write null, which a client reads as NaN or not at all."""
    return orjson.Fragment(json.dumps(value, allow_nan=True, separators=(",", ":")).encode())


def encode_infer_response(
    response: InferResponse, requested: list[RequestedOutput], binary_default: bool
) -> tuple[list[Any], int | None]:
    """The response body parts and the JSON header length (None when the body is JSON only)."""
    wanted = {o.name: o.parameters for o in requested}
    entries = []
    binary_parts: list[Any] = []
    for tensor in response.outputs:
        entry: dict[str, Any] = {"name": tensor.name, "datatype": tensor.datatype, "shape": list(tensor.shape)}
        params = wanted.get(tensor.name, {})
        if tensor.data is None:  # written to a client region
            entries.append(entry)
            continue
        binary = params.get("binary_data", binary_default)
        if binary:
            nbytes = tensor.data.nbytes if isinstance(tensor.data, memoryview) else len(tensor.data)
            entry["parameters"] = {"binary_data_size": nbytes}
            if nbytes:
                binary_parts.append(tensor.data)
        else:
            values = json_values(tensor)
            entry["data"] = json_text(values) if non_finite(tensor) else values
        entries.append(entry)
    head: dict[str, Any] = {"model_name": response.model_name, "model_version": response.model_version}
    if response.id:
        head["id"] = response.id
    if response.parameters:
        head["parameters"] = response.parameters
    head["outputs"] = entries
    header = orjson.dumps(head)
    if binary_parts or any("parameters" in e for e in entries):
        return [header, *binary_parts], len(header)
    return [header], None


def byte_size(datatype: str, shape: tuple[int, ...]) -> int | None:
    if datatype == "BYTES":
        return None
    count = 1
    for d in shape:
        count *= d
    return count * ITEMSIZE[datatype]


__all__ = ["parse_infer_request", "encode_infer_response", "Status", "unsupported"]
