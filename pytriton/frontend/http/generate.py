"""Triton's generate extension: `POST /v2/models/<model>[/versions/<version>]/generate` and `.../generate_stream`.

The request is one JSON object. A key that names an input of the model becomes that input: its value (a string, a
number, a boolean or an array of them, nested arrays read in order) is shaped to the input's dims as Triton shapes it
(fixed dims take their share of the element count, the innermost variable dim takes the rest, other variable dims are
1). Every other key becomes a request parameter (a string, a boolean, an integer or a number), the keys of the object
`parameters` too (where a key naming an input is that input). `id` is the request's id (and, as in Triton, also a
parameter). The model's outputs come back flattened into one JSON object with `model_name`, `model_version`, `id`
(when given) and the response's parameters, keys in sorted order: an output of one element as that element, others as
a flat array.

`generate` answers one JSON object: a model that does not answer with exactly one response gets Triton's error (with
the status of its first response, as Triton). `generate_stream` answers `text/event-stream; charset=utf-8`, one
`data: {...}\\n\\n` event per response, as they come: an error before the model answered is an HTTP error (JSON), an
error as the first response sets the status and is the one event, a later one is an error event that ends the
stream. A client that leaves cancels the request (the model's `is_cancelled()` turns true); a client that does not
read holds the producer back (`HttpConnection._send_stream`: the next response is taken only once the client took
the one before, and a stalled client is dropped after the body timeout).

Every answer follows tritonserver 2.51's (its src/http_server.cc, `HandleGenerate`): its wording and statuses,
including the 500s it answers for unparsable JSON and values of the wrong JSON type.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable
from typing import Any

import numpy as np
import orjson

from pytriton.core.server_core import ServerCore
from pytriton.core.types import InferRequest, InferResponse, Tensor
from pytriton.core.validation import validate_request
from pytriton.exceptions import ServerError, Status, internal, invalid_arg, unsupported
from pytriton.frontend.http.infer import flatten, json_text, json_values, non_finite
from pytriton.frontend.http1 import HttpRequest, HttpResponse, error_response
from pytriton.model_config.datatypes import TRITON_TO_NUMPY, serialize_bytes_tensor

JSON = "application/json"
EVENT_STREAM = "text/event-stream; charset=utf-8"
PARAMETERS = "parameters"  # the one key whose object holds more keys (Triton's generate request schema)
EXACTLY_ONE = ("generate expects model to produce exactly 1 response, use generate stream for model that generates "
               "various number of responses")
_INT64 = (-(1 << 63), 1 << 63)
_UINT64 = (0, 1 << 64)


# ---- request ---------------------------------------------------------------------------------
def parse_body(body: bytes | bytearray) -> dict[str, Any]:
    """The request's JSON object (Triton's wording and statuses: INTERNAL for what its JSON reader refuses)."""
    if not body.strip():
        raise internal("failed to parse the request JSON buffer: The document is empty. at 0")
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise internal(f"failed to parse the request JSON buffer: {exc.msg}. at {exc.pos}") from None
    if not isinstance(obj, dict):
        raise internal("attempt to get members for non-object")
    if _may_repeat_keys(body, obj):  # (orjson keeps the last of a repeated key; Triton reads every member in order)
        repeated: Members = json.loads(body, object_pairs_hook=Members)
        return repeated
    return obj


class Members(dict[str, Any]):
    """A JSON object of a body that may repeat a key: a dict (the last value of each key), and `pairs`, every member
    in the body's order."""

    def __init__(self, pairs: list[tuple[str, Any]]):
        super().__init__(pairs)
        self.pairs = pairs


def _may_repeat_keys(body: bytes | bytearray, obj: dict[str, Any]) -> bool:
    """Whether a key of `obj` (or of its nested parameters) may appear twice in `body`: one of them written twice as
    a quoted string, or an escape in the body (a key may be written another way)."""
    if b"\\" in body:
        return True
    nested = obj.get(PARAMETERS)
    keys = [*obj, *nested] if isinstance(nested, dict) else obj
    return any(body.count(b'"' + key.encode() + b'"') > 1 for key in keys)


def _parameter(name: str, value: Any) -> Any:
    """A JSON value as a request parameter: Triton takes strings, integers (int64), booleans and other numbers."""
    if isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return value if _INT64[0] <= value < _INT64[1] else float(value)
    if isinstance(value, float):
        return value
    raise invalid_arg(f"parameter '{name}' has invalid type. It should be either 'int', 'bool', or 'string'.")


def input_shape(name: str, dims: list[int], count: int) -> tuple[int, ...]:
    """The shape Triton gives `count` elements for an input of `dims` (-1: variable): each fixed dim takes its share,
    the innermost variable dim the rest, other variable dims 1."""
    shape = list(dims)
    left = count
    for d in reversed(shape):
        if d != -1:
            if d <= 0 or left % d:
                raise invalid_arg(f"The schema can not convert input '{name}' to tensor with proper shape")
            left //= d
    for i in range(len(shape) - 1, -1, -1):
        if shape[i] == -1:
            shape[i], left = left, 1
    if left != 1:
        raise invalid_arg(f"The schema can not convert input '{name}' to tensor with proper shape")
    return tuple(shape)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and _INT64[0] <= v < _INT64[1]


def _is_uint(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and _UINT64[0] <= v < _UINT64[1]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# datatype -> (whether a JSON value fits, the words of TritonJson's refusal, the numpy type read into)
_READ: dict[str, tuple[Callable[[Any], bool], str, Any]] = {
    "BOOL": (_is_bool, "attempt to access JSON non-boolean as boolean", np.bool_),
    **{t: (_is_uint, "attempt to access JSON non-unsigned-integer as unsigned-integer", np.uint64)
       for t in ("UINT8", "UINT16", "UINT32", "UINT64")},
    **{t: (_is_int, "attempt to access JSON non-signed-integer as signed-integer", np.int64)
       for t in ("INT8", "INT16", "INT32", "INT64")},
    **{t: (_is_number, "attempt to access JSON non-number as double", np.float64) for t in ("FP32", "FP64")},
}


def input_tensor(name: str, datatype: str, dims: list[int], value: Any) -> Tensor:
    """An input from its JSON value, as Triton's generate endpoint reads it."""
    count = len(value) if isinstance(value, list) else 1
    leaves = flatten(value)
    if datatype == "BYTES":  # (sized first: every leaf must be a string)
        if not all(isinstance(v, str) for v in leaves):
            raise internal("Unable to parse JSON bytes array: attempt to access JSON non-string as string")
        shape = input_shape(name, dims, count)
        array = np.empty(len(leaves), dtype=np.object_)
        array[:] = [v.encode("utf-8") for v in leaves]
        return Tensor(name, datatype, shape, serialize_bytes_tensor(array))
    shape = input_shape(name, dims, count)
    if datatype in ("FP16", "BF16"):
        raise invalid_arg(f"receiving {datatype} data via JSON is not supported. Please use the binary data format "
                          f"for input {name}")
    read = _READ.get(datatype)
    if read is None:
        raise invalid_arg(f"invalid datatype for input {name}")
    fits, refusal, wide = read
    mismatch = internal("Unable to parse 'data': Shape does not match true shape of 'data' field")
    for index, leaf in enumerate(leaves):  # (Triton checks the count before each element's type)
        if index >= count:
            raise mismatch
        if not fits(leaf):
            raise internal(f"Unable to parse 'data': {refusal}")
    if len(leaves) != count:
        raise mismatch
    array = np.array(leaves, dtype=wide).astype(TRITON_TO_NUMPY[datatype])  # (narrow types wrap, as Triton's casts)
    return Tensor(name, datatype, shape, array.tobytes())


def generate_request(name: str, version: str, obj: dict[str, Any], inputs: dict[str, tuple[str, list[int]]]
                     ) -> InferRequest:  # fmt: skip
    """The inference request of a generate body; `inputs`: the model's inputs (datatype, metadata shape) by name."""
    request_id = obj.get("id", "")
    if not isinstance(request_id, str):
        raise internal("Unable to parse 'id': attempt to access JSON non-string as string")
    request = InferRequest(name, version, request_id)
    seen: set[str] = set()

    def convert(members: dict[str, Any], top: bool) -> None:
        for key, value in members.pairs if isinstance(members, Members) else members.items():
            if top and key == PARAMETERS:
                if key in inputs:
                    raise invalid_arg(f"Keyword '{key}' for nested schema also given as input tensor name")
                if not isinstance(value, dict):
                    raise internal(f"Expected JSON object for keyword: '{key}': attempt to access JSON non-object as "
                                   "object")
                try:
                    convert(value, False)
                except ServerError as exc:
                    raise ServerError(exc.status, f"Converting keyword: '{key}': {exc.message}") from None
            elif key in inputs:
                if key in seen:
                    raise invalid_arg(f"[request id: {request_id or '<id_unknown>'}] input '{key}' already exists in "
                                      "request")
                seen.add(key)
                datatype, dims = inputs[key]
                request.inputs.append(input_tensor(key, datatype, dims, value))
            else:
                request.parameters[key] = _parameter(key, value)

    convert(obj, True)
    return request


# ---- response --------------------------------------------------------------------------------
def response_object(response: InferResponse) -> dict[str, Any]:
    """A response as the generate endpoint answers it: id, model name and version, the response's parameters and its
    outputs (one element: the element; more: a flat array), keys sorted; a name already taken keeps its first value."""
    entries: dict[str, Any] = {}
    if response.id:
        entries["id"] = response.id
    entries["model_name"] = response.model_name
    entries["model_version"] = str(response.model_version)
    for key, value in response.parameters.items():
        if isinstance(value, (bytes, bytearray, memoryview)):
            raise unsupported(f"Response parameter '{key}' has type 'TRITONSERVER_PARAMETER_BYTES' which is not "
                              "currently supported")
        entries.setdefault(key, value)
    for tensor in response.outputs:
        if tensor.name in entries:
            continue
        values = json_values(tensor)
        count = 1
        for d in tensor.shape:
            count *= d
        value = values[0] if count == 1 and len(values) == 1 else values
        entries[tensor.name] = json_text(value) if non_finite(tensor) else value
    return {key: entries[key] for key in sorted(entries)}


def _encode(response: InferResponse) -> bytes:
    """The response's JSON (its buffers released either way)."""
    try:
        return orjson.dumps(response_object(response))
    finally:
        response.release()


def event(data: bytes) -> bytes:
    """One server-sent event carrying `data` (a JSON object: no line breaks)."""
    return b"data: " + data + b"\n\n"


def _error(exc: ServerError) -> bytes:
    return orjson.dumps({"error": exc.message})


def _status(exc: ServerError) -> int:
    """The status of an answer whose first response is the error `exc`: 400, whatever its code. (tritonserver 2.51
    reads the code of that error after it has freed it, `GenerateRequestClass::InferResponseComplete`, and answers
    400 in practice: a Python model's `TritonError` with INTERNAL, its default, is 500 on `/infer` but 400 here.)"""
    return 400


def _before_inference(exc: ServerError) -> bool:
    """Whether the core refused the request as it was submitted, before any model saw it (the server draining, the
    model's queue full, no instance left): Triton answers those as bad requests (JSON, the error's status), not as
    the model's first response. (The request's checks ran before; what the model or its execution answers is UNAVAILABLE
    only when its execution failed, marked BACKEND, or when a model answers that code itself: then it is taken for a
    refusal too.)"""
    return exc.status is Status.UNAVAILABLE and exc.failure_reason == "OTHER"


# ---- the routes ------------------------------------------------------------------------------
async def generate(core: ServerCore, request: HttpRequest, name: str, version: str, streaming: bool) -> HttpResponse:
    """Answer a generate (`streaming` False) or generate_stream request (the caller checked access and method)."""
    metadata = core.model_metadata(name, version)  # (an unknown model or version: 404 first, as Triton)
    encoding = request.headers.get("content-encoding")
    if encoding is not None and encoding.strip().lower() != "identity":
        raise invalid_arg("Unsupported content-encoding, only 'identity' is supported.")
    inputs = {i["name"]: (i["datatype"], list(i["shape"])) for i in metadata.get("inputs", [])}
    infer_request = generate_request(name, version, parse_body(request.body), inputs)
    model = core.registry.get(name, version)
    validate_request(model.config, infer_request)  # (the core checks again; here its refusal is an HTTP error)
    content_type = EVENT_STREAM if streaming else JSON
    if not model.config.decoupled:
        try:
            response = await core.infer(infer_request)
        except ServerError as exc:
            if _before_inference(exc):
                raise
            return _answer(_status(exc), _error(exc), streaming)
        try:
            return _answer(200, _encode(response), streaming)
        except ServerError as exc:
            return _answer(_status(exc), _error(exc), streaming)
    stream = core.infer_stream(infer_request)
    try:
        first = await anext(stream)
    except StopAsyncIteration:  # the model sent the final flag alone
        return HttpResponse(200, [], [("Content-Type", content_type)]) if streaming else \
            HttpResponse(200, [_error(internal(EXACTLY_ONE))], [("Content-Type", JSON)])
    except ServerError as exc:
        await stream.aclose()
        if _before_inference(exc):
            raise
        return _answer(_status(exc), _error(exc), streaming)
    except BaseException:
        await stream.aclose()
        raise
    if not streaming:
        return await _exactly_one(first, stream)
    try:
        data = _encode(first)
    except ServerError as exc:
        await stream.aclose()
        return _answer(_status(exc), _error(exc), True)
    return HttpResponse(200, [], [("Content-Type", EVENT_STREAM)], stream=_events(data, stream))


def _answer(status: int, data: bytes, streaming: bool) -> HttpResponse:
    if streaming:
        return HttpResponse(status, [event(data)], [("Content-Type", EVENT_STREAM)])
    return HttpResponse(status, [data], [("Content-Type", JSON)])


async def _exactly_one(first: InferResponse, stream: AsyncGenerator[InferResponse, None]) -> HttpResponse:
    """`generate` on a decoupled model whose first response was `first`: its answer if no other follows, else
    Triton's error, with the first response's status (200). A second response (or error) ends the request at once
    (Triton keeps every response until the last, then answers the same)."""
    more = True
    try:
        second = await anext(stream)
        second.release()
    except StopAsyncIteration:
        more = False
    except ServerError:
        pass
    except BaseException:
        first.release()
        raise
    finally:
        await stream.aclose()
    if more:
        first.release()
        return HttpResponse(200, [_error(internal(EXACTLY_ONE))], [("Content-Type", JSON)])
    try:
        return HttpResponse(200, [_encode(first)], [("Content-Type", JSON)])
    except ServerError as exc:
        return error_response(_status(exc), exc.message)


async def _events(first: bytes, stream: AsyncGenerator[InferResponse, None]) -> AsyncGenerator[bytes, None]:
    """The events of a stream whose first response is `first`: one per response, an error as the last one. Closed by
    the connection however it ends: the request is cancelled if the model has not finished."""
    try:
        yield event(first)
        while True:
            try:
                response = await anext(stream)
            except StopAsyncIteration:
                return
            except ServerError as exc:
                yield event(_error(exc))
                return
            try:
                data = _encode(response)
            except ServerError as exc:
                yield event(_error(exc))
                return
            yield event(data)
    finally:
        await stream.aclose()


__all__ = ["EVENT_STREAM", "EXACTLY_ONE", "event", "generate", "generate_request", "input_shape", "input_tensor",
           "parse_body", "response_object"]
