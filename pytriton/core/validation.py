"""Checks an inference request against the model configuration, in Triton's order and wording.

Runs in the server before anything reaches a worker. Messages follow Triton core's
(`infer_request.cc`, `model.cc`) because clients and tests match on them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from pytriton.core.types import InferRequest, RequestedOutput
from pytriton.exceptions import ServerError, invalid_arg
from pytriton.model_config.datatypes import ITEMSIZE, TRITON_TO_NUMPY
from pytriton.model_config.triton_model_config import TritonModelConfig

INT64_MAX = (1 << 63) - 1
_LEN = struct.Struct("<I")

BATCH_NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended "
    "to each input shape. If you want to specify the full shape including the batch dim in your input dims "
    "config, try setting max_batch_size to zero. See the model configuration docs for more info on max_batch_size."
)


def dims_str(dims: Iterable[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _names(names: Iterable[str]) -> str:
    return "[" + ",".join(f"'{n}'" for n in names) + "]"


def _prefix(request: InferRequest) -> str:
    return f"[request id: {request.id or '<id_unknown>'}] "


def _err(request: InferRequest, message: str) -> ServerError:
    return invalid_arg(_prefix(request) + message)


def check_duplicates(request: InferRequest) -> None:
    """An input named twice (Triton rejects it when it is added)."""
    seen: set[str] = set()
    for tensor in request.inputs:
        if tensor.name in seen:
            raise _err(request, f"input '{tensor.name}' already exists in request")
        seen.add(tensor.name)


def drop_repeated_outputs(outputs: list[RequestedOutput]) -> None:
    """An output asked for twice is asked for once, the first time it is named (as tritonserver 2.51, which answers
    it once, in the first one's form); the list is changed in place, for every holder of it."""
    if len(outputs) < 2 or len({o.name for o in outputs}) == len(outputs):
        return
    seen: set[str] = set()
    kept = []
    for output in outputs:
        if output.name not in seen:
            seen.add(output.name)
            kept.append(output)
    outputs[:] = kept


def validate_request(config: TritonModelConfig, request: InferRequest) -> int:
    """Raise ServerError(INVALID_ARG) if the request does not fit the model; return its batch size."""
    model = config.model_name
    check_duplicates(request)
    for output in request.outputs:
        if output.name not in config.output_by_name:
            raise invalid_arg(f"unexpected inference output '{output.name}' for model '{model}'")

    given = [t.name for t in request.inputs]
    required = [s.name for s in config.inputs if not s.optional]
    given_set = set(given)
    # Triton compares counts only; a misnamed input then fails as "unexpected inference input" below.
    if len(given) > len(config.inputs) or len(given) < len(required):
        missing = [name for name in required if name not in given_set]
        if len(required) == len(config.inputs):
            head = f"expected {len(config.inputs)} inputs"
        else:
            head = f"expected number of inputs between {len(required)} and {len(config.inputs)}"
        # Triton renders an empty "missing" list as a lone ']' — keep that quirk; clients match on it.
        missing_text = _names(missing) if missing else "]"
        raise _err(
            request,
            f"{head} but got {len(given)} inputs for model '{model}'. Got input(s) {_names(given)}, "
            f"but missing required input(s) {missing_text}. Please provide all required input(s).",
        )

    batch_size = 0
    for tensor in request.inputs:
        if tensor.name not in config.input_by_name:
            raise invalid_arg(f"unexpected inference input '{tensor.name}' for model '{model}'")
        if config.max_batch_size > 0:
            if not tensor.shape:
                raise _err(request, f"input '{tensor.name}' has no shape but model requires batch dimension for '{model}'")
            this_batch = tensor.shape[0] & 0xFFFFFFFF  # Triton keeps the batch size as uint32
            if tensor is request.inputs[0]:
                batch_size = this_batch
            elif this_batch != batch_size:
                raise _err(request, f"input '{tensor.name}' batch size does not match other inputs for '{model}'")
    if batch_size > config.max_batch_size:
        raise _err(request, f"inference request batch-size must be <= {config.max_batch_size} for '{model}'")

    for tensor in request.inputs:
        spec = config.input_by_name[tensor.name]
        if tensor.datatype != spec.datatype:
            shown = tensor.datatype if tensor.datatype in TRITON_TO_NUMPY else "<invalid>"
            raise _err(
                request,
                f"inference input '{tensor.name}' data-type is '{shown}', but model '{model}' expects '{spec.datatype}'",
            )
        shape = tensor.shape
        dims = shape[1:] if config.max_batch_size > 0 else shape
        # (a shape equal to the configured one matches; `in`/`min` below: the same tests as a loop, without one)
        if dims != spec.shape and (len(dims) != len(spec.shape)
                                   or any(w != -1 and w != g for w, g in zip(spec.shape, dims))):
            expected = ([-1] if config.max_batch_size > 0 else []) + list(spec.shape)
            note = BATCH_NOTE if config.max_batch_size > 0 else ""
            raise _err(
                request,
                f"unexpected shape for input '{tensor.name}' for model '{model}'. "
                f"Expected {dims_str(expected)}, got {dims_str(shape)}. {note}",
            )
        if -1 in dims:
            raise _err(
                request,
                f"All input dimensions should be specified for input '{tensor.name}' for model '{model}', "
                f"got {dims_str(shape)}",
            )
        if shape and min(shape) < 0:
            kind = "in shape " if spec.datatype == "BYTES" else ""
            raise invalid_arg(f"tensor '{tensor.name}' contains an invalid dimension {kind}{dims_str(shape)}")
        count = 1
        for d in shape:
            count *= d
        if count > INT64_MAX:
            raise invalid_arg(f"element count for tensor '{tensor.name}' exceeds maximum size of {INT64_MAX}")
        if tensor.data is None:  # lives in a client region; its size was given with the region reference
            actual = tensor.nbytes
        else:
            actual = tensor.data.nbytes if isinstance(tensor.data, memoryview) else len(tensor.data)
        if spec.datatype == "BYTES":
            if tensor.data is not None:
                _check_bytes(request, model, tensor.name, tensor.data, count)
            continue
        expected_bytes = count * ITEMSIZE[spec.datatype]
        if expected_bytes > INT64_MAX:
            raise invalid_arg(f"byte size for tensor '{tensor.name}' exceeds maximum size of {INT64_MAX}")
        if actual != expected_bytes:
            raise _err(
                request,
                f"input byte size mismatch for input '{tensor.name}' for model '{model}'. "
                f"Expected {expected_bytes}, got {actual}",
            )
    return batch_size if config.max_batch_size > 0 else 1


def batch_signature(config: TritonModelConfig, request: InferRequest) -> tuple[Any, ...]:
    """What a request must share with the others of a batch: its inputs' names, datatypes and shapes past the batch
    dimension, but for an input that allows a ragged batch (`allow_ragged_batch`: as in Triton, requests differing in
    its shape batch together)."""
    ragged = config.ragged_inputs
    if not ragged:
        return tuple((t.name, t.datatype, t.shape[1:]) for t in request.inputs)
    return tuple((t.name, t.datatype, None if t.name in ragged else t.shape[1:]) for t in request.inputs)


LAYOUTS_MAX = 64  # layouts of one model remembered (more: forgotten, then remembered again as requests come)


def validate_layout(config: TritonModelConfig, request: InferRequest, layouts: dict[Any, Any]) -> tuple[int, Any]:
    """`validate_request` and the request's batching signature (its inputs' names, datatypes and shapes past the batch
    dimension), for a request with a `layout`: what depends on the layout alone is checked once per layout and
    remembered in `layouts` (the model's), the data's sizes each time, in `validate_request`'s order and wording
    (once the layout has passed, a size is all that can still be wrong)."""
    known = layouts.get(request.layout)
    if known is None:
        batch_size = validate_request(config, request)  # (raises before anything is remembered)
        sizes = []
        for tensor in request.inputs:
            count = 1
            for d in tensor.shape:
                count *= d
            datatype = config.input_by_name[tensor.name].datatype
            sizes.append((None if datatype == "BYTES" else count * ITEMSIZE[datatype], count))
        signature = batch_signature(config, request)
        if len(layouts) >= LAYOUTS_MAX:
            layouts.clear()
        layouts[request.layout] = (batch_size, tuple(sizes), signature)
        return batch_size, signature
    batch_size, sizes, signature = known
    for tensor, (expected_bytes, count) in zip(request.inputs, sizes):
        data = tensor.data
        if expected_bytes is None:  # BYTES: its elements are read
            if data is not None:
                _check_bytes(request, config.model_name, tensor.name, data, count)
            continue
        actual = tensor.nbytes if data is None else data.nbytes if isinstance(data, memoryview) else len(data)
        if actual != expected_bytes:
            raise _err(
                request,
                f"input byte size mismatch for input '{tensor.name}' for model '{config.model_name}'. "
                f"Expected {expected_bytes}, got {actual}",
            )
    return batch_size, signature


def _check_bytes(request: InferRequest, model: str, name: str, data: Any, expected: int) -> None:
    view = memoryview(data).cast("B")
    size = len(view)
    pos = 0
    count = 0
    while pos < size:
        if size - pos < 4:
            raise _err(
                request,
                f"incomplete string length indicator for inference input '{name}' for model '{model}', "
                f"expecting 4 bytes but only {size - pos} bytes available. "
                "Please make sure the string length indicator is in one buffer.",
            )
        if count == expected:
            raise _err(
                request,
                f"unexpected number of string elements {expected + 1} for inference input '{name}' "
                f"for model '{model}', expecting {expected}",
            )
        (length,) = _LEN.unpack_from(view, pos)
        if length > size - pos - 4:  # Triton's python backend refuses it (its core only counts elements)
            raise invalid_arg(
                f"incomplete string data for inference input '{name}', expecting string of length {length} "
                f"but only {size - pos - 4} bytes available"
            )
        pos += 4 + length
        count += 1
    if count != expected:
        raise _err(
            request, f"expected {expected} string elements for inference input '{name}' for model '{model}', got {count}"
        )
