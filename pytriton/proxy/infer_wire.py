"""An INFER message's header written without building its protobuf objects, for the common request.

`ProxyRouter.submit` builds one `ServerToWorker` per execution; filling a `RequestItem` and a `TensorRef` per input
through protobuf's accessors costs a few microseconds per request, more than the rest of the hop's encoding. A
request whose inputs all ride inline (the usual small tensors: in the shared frame of small inputs, or a frame of
their own) and which has no parameters and no output regions is written here instead: each input's `TensorRef`
from a cached serialisation of its name, datatype, shape and size, then its frame and offset, then the request's
requested outputs, id, correlation id and flags, in field-number order. The bytes are those protobuf's
serialisation gives (tests/proxy/test_infer_wire.py compares them); any other request is built through protobuf
and spliced in as it serialises itself, so the worker reads one ordinary message either way.
"""

from __future__ import annotations

from typing import Any

from pytriton.model_config.datatypes import TRITON_TO_CODE
from pytriton.proxy.messages import FLAG_NOT_READY, RequestData, TensorRef

_ONE_BYTE = [bytes((value,)) for value in range(128)]
_PREFIX_MAX = 4096  # cached TensorRef prefixes (distinct name, datatype, shape, size); the cache starts over beyond
_MASK64 = (1 << 64) - 1
_prefixes: dict[tuple[str, str, tuple[int, ...], int], bytes] = {}
# A not-ready row of a sequence batch (no inputs): its item, by the RequestData the supervisor keeps for it and sends
# again and again (supervisor/instance.to_request_data); a request never changes once handed over
_NOT_READY_ITEMS: dict[int, tuple[RequestData, bytes]] = {}


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative integer."""
    if value < 128:
        return _ONE_BYTE[value]
    if value < 1 << 14:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag, the payload's length, the payload."""
    size = len(payload)
    return tag + (_ONE_BYTE[size] if size < 128 else varint(size)) + payload


def _prefix(name: str, datatype: str, shape: tuple[int, ...], nbytes: int) -> bytes:
    """A TensorRef's fields 1-4 (name, dtype, shape, nbytes) as protobuf serialises them."""
    key = (name, datatype, shape, nbytes)
    prefix = _prefixes.get(key)
    if prefix is None:
        if len(_prefixes) >= _PREFIX_MAX:
            _prefixes.clear()
        ref = TensorRef(name=name, shape=shape, nbytes=nbytes)
        if datatype:
            ref.dtype = TRITON_TO_CODE[datatype]
        prefix = _prefixes[key] = ref.SerializeToString()
    return prefix


def inline_item(request: RequestData, frames: list[Any], pack: list[Any], pack_max: int, inline_max: int
                ) -> bytes | None:  # fmt: skip
    """The serialised `RequestItem` of `request` if it is the common kind (see the module's docstring), its inputs
    placed as `ProxyRouter._encode_tensor` places inline ones: those of at most `pack_max` bytes in the shared frame
    (`pack` is [its frame number or 0, its parts, its size]), others in a frame each. None (and nothing placed) for
    any other request (one with an input over `inline_max` bytes goes through the request arena)."""
    if request.flags & FLAG_NOT_READY and not request.inputs:  # (the same few rows over and over: see below)
        known = _NOT_READY_ITEMS.get(id(request))
        if known is not None and known[0] is request:
            return known[1]
    if request.parameters or request.output_regions or request.chain:
        return None
    inputs = request.inputs
    for tensor in inputs:
        data = tensor.data
        if data is None or tensor.slot is not None or tensor.region or tensor.cuda_handle:
            return None
        if (data.nbytes if isinstance(data, memoryview) else len(data)) > inline_max:
            return None  # (in the request arena)
    tail = b""
    if request.requested_outputs or request.request_id or request.correlation_id or request.flags:
        try:
            tail = _tail(request)
        except UnicodeEncodeError:  # (protobuf's own path says what is wrong)
            return None
    parts = []
    for tensor in inputs:
        data = tensor.data
        nbytes = data.nbytes if isinstance(data, memoryview) else len(data)
        shape = tensor.shape
        if type(shape) is not tuple:  # (a list would not do as a key)
            shape = tuple(shape)
        prefix = _prefixes.get((tensor.name, tensor.datatype, shape, nbytes))
        if prefix is None:
            prefix = _prefix(tensor.name, tensor.datatype, shape, nbytes)
        if nbytes > pack_max:  # (within the inline limit: a frame of its own)
            frames.append(data)
            frame, offset = len(frames), 0
        else:
            if not pack[0]:
                frames.append(b"")
                pack[0] = len(frames)
            frame, offset = pack[0], pack[2]
            pack[1].append(data)
            pad = -nbytes % 8
            if pad:
                pack[1].append(bytes(pad))
            pack[2] = offset + nbytes + pad
        ref = prefix + b"\x28" + (_ONE_BYTE[frame] if frame < 128 else varint(frame))
        if offset:
            ref += b"\x38" + (_ONE_BYTE[offset] if offset < 128 else varint(offset))
        size = len(ref)
        parts.append(b"\x0a" + _ONE_BYTE[size] + ref if size < 128 else _field(b"\x0a", ref))
    if not inputs and request.flags & FLAG_NOT_READY:
        if len(_NOT_READY_ITEMS) >= 64:
            _NOT_READY_ITEMS.clear()
        _NOT_READY_ITEMS[id(request)] = (request, tail)
    if tail:
        parts.append(tail)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _tail(request: RequestData) -> bytes:
    """A RequestItem's fields after its inputs: requested outputs, request id, correlation id, flags."""
    parts = [_field(b"\x12", name.encode()) for name in request.requested_outputs]
    if request.request_id:
        parts.append(_field(b"\x2a", request.request_id.encode()))
    correlation_id = request.correlation_id
    if isinstance(correlation_id, str):
        if correlation_id:
            parts.append(_field(b"\x3a", correlation_id.encode()))
    elif correlation_id and correlation_id & _MASK64:
        parts.append(b"\x30" + varint(correlation_id & _MASK64))
    if request.flags:
        parts.append(b"\x40" + varint(request.flags))
    return b"".join(parts)


def infer_message(call_id: int, items: list[bytes], tail: bytes) -> bytes:
    """A `ServerToWorker` INFER (kind 0, protobuf's default, is not written) with id `call_id`, the serialised
    `RequestItem`s `items`, and `tail`: the serialisation of the message's later fields (freed slots, window)."""
    parts = [b"\x10" + varint(call_id)]
    for item in items:
        size = len(item)
        parts.append(b"\x1a" + _ONE_BYTE[size] + item if size < 128 else _field(b"\x1a", item))
    if tail:
        parts.append(tail)
    return b"".join(parts)
