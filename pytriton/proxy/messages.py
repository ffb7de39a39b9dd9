"""Typed messages of the worker protocol (protos/worker.proto) and the values they carry."""

from __future__ import annotations

import dataclasses
from typing import Any

from pytriton.proxy._generated.worker_pb2 import (  # re-exported (see __all__): the typed messages
    MetricOp,
    ModelLoading,
    Param,
    RequestItem,
    ResponseItem,
    ServerToWorker,
    TensorRef,
    WorkerToServer,
)

ParamValue = "bool | int | float | str"


def params_to_proto(values: dict[str, Any], target: Any) -> None:
    """Fill a protobuf map<string, Param> from a dict of bool/int/float/str."""
    for key, value in values.items():
        param = target[key]
        if isinstance(value, bool):
            param.bool_value = value
        elif isinstance(value, int):
            if value >= 1 << 63:
                param.uint_value = value
            else:
                param.int_value = value
        elif isinstance(value, float):
            param.double_value = value
        else:
            param.string_value = str(value)


def params_from_proto(source: Any) -> dict[str, Any]:
    """Turn a protobuf map<string, Param> back into a dict."""
    out: dict[str, Any] = {}
    for key in source:  # (a map's items() is a Python-level view: twice as slow)
        param = source[key]
        kind = param.WhichOneof("value")
        out[key] = getattr(param, kind) if kind else None
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class ArenaSlot:
    """Where a worker put a tensor in its response arena: the owner's pid, the kind part of its segment names, the
    segment and the offset. Another worker can map it there, so the tensor is handed on without a copy."""

    owner_pid: int
    kind: str
    segment: int
    offset: int


@dataclasses.dataclass
class TensorData:
    """A tensor as the transport moves it: wire datatype, shape and a buffer with its bytes.

    `data` is None for a tensor that lives in a client-registered region. From a front-end, `region` is the
    region's name and `offset` is relative to it; the core turns that into the transport's form: the
    system-shm key (or a CUDA handle), the bytes to map, and the offset within the shared-memory object.
    """

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: Any = None
    region: str = ""
    region_size: int = 0
    offset: int = 0
    nbytes: int = 0
    region_id: int = 0
    cuda_handle: bytes = b""
    cuda_device: int = -1
    slot: ArenaSlot | None = None  # the bytes of `data` lie in this slot of a worker's response arena


@dataclasses.dataclass
class RequestData:
    """One request for a worker: inputs, requested outputs and parameters."""

    inputs: list[TensorData]
    requested_outputs: list[str]
    parameters: dict[str, Any]
    output_regions: list[TensorData] = dataclasses.field(default_factory=list)
    request_id: str = ""
    correlation_id: int | str = 0  # the sequence id (as the client sent it: an integer or a string)
    flags: int = 0  # SEQUENCE_START = 1, SEQUENCE_END = 2
    chain: tuple[tuple[str, int, str], ...] = ()  # the call chain: (model, version, instance) that wait for it


def encode_chain(chain: tuple[tuple[str, int, str], ...], item: Any) -> None:
    """A request's call chain into a RequestItem's `callers`."""
    for model, version, instance in chain:
        item.callers.add(model=model, version=version, instance=instance)


def decode_chain(item: Any) -> tuple[tuple[str, int, str], ...]:
    """A RequestItem's call chain (empty for nearly every request)."""
    return tuple((c.model, c.version, c.instance) for c in item.callers) if len(item.callers) else ()


# Request flags: the client's sequence START (1) and END (2), as Triton numbers them; and two for the worker alone (a
# row of a sequence batch the worker completes, see backends/sequence_rows; a model never sees them):
FLAG_SEQUENCE_CONTROLS = 4  # add the control inputs of the model's sequence batcher (START/END from the flags)
FLAG_NOT_READY = 8  # a not-ready row: its inputs zero as those of the batch's first ready row; its answer is dropped
CLIENT_FLAGS = 3
# ... and three that say which sequence parameters the fields carry instead of the parameters map (server to worker):
FLAG_SEQUENCE_ID_PARAM = 16  # parameters["sequence_id"] is the correlation id
FLAG_START_PARAM = 32  # parameters["sequence_start"] is bool(flags & 1)
FLAG_END_PARAM = 64  # parameters["sequence_end"] is bool(flags & 2)
PARAM_FLAGS = FLAG_SEQUENCE_ID_PARAM | FLAG_START_PARAM | FLAG_END_PARAM


def sequence_fields(parameters: dict[str, Any]) -> tuple[int | str, int]:
    """The correlation id and sequence flags a request's `sequence_id` / `sequence_start` / `sequence_end`
    parameters give."""
    correlation_id = parameters.get("sequence_id", 0)
    if not isinstance(correlation_id, (int, str)) or isinstance(correlation_id, bool):
        correlation_id = 0
    flags = (1 if parameters.get("sequence_start") is True else 0) | (2 if parameters.get("sequence_end") is True else 0)
    return correlation_id, flags


def carry_sequence_parameters(parameters: dict[str, Any]) -> tuple[dict[str, Any], int | str, int]:
    """`sequence_fields`, with the parameters left for the map: those the fields carry exactly (flagged
    FLAG_*_PARAM) are left out of it, and `restore_sequence_parameters` puts them back (a map entry costs far more to
    encode and decode than a field)."""
    correlation_id, flags = sequence_fields(parameters)
    if not parameters or ("sequence_id" not in parameters and "sequence_start" not in parameters
                          and "sequence_end" not in parameters):
        return parameters, correlation_id, flags
    value = parameters.get("sequence_id")
    carried = []
    if value is not None and value == correlation_id and (
            (type(value) is int and 0 < value < 1 << 63) or (type(value) is str and value)):
        carried.append("sequence_id")
        flags |= FLAG_SEQUENCE_ID_PARAM
    if type(parameters.get("sequence_start")) is bool:
        carried.append("sequence_start")
        flags |= FLAG_START_PARAM
    if type(parameters.get("sequence_end")) is bool:
        carried.append("sequence_end")
        flags |= FLAG_END_PARAM
    if len(carried) == len(parameters):  # (the usual sequence request: nothing left for the map)
        return {}, correlation_id, flags
    rest = dict(parameters)
    for name in carried:
        del rest[name]
    return rest, correlation_id, flags


def restore_sequence_parameters(parameters: dict[str, Any], correlation_id: int | str, flags: int) -> int:
    """Put the sequence parameters the fields carried back into `parameters`; returns the flags without the
    FLAG_*_PARAM bits."""
    if flags & FLAG_SEQUENCE_ID_PARAM:
        parameters["sequence_id"] = correlation_id
    if flags & FLAG_START_PARAM:
        parameters["sequence_start"] = bool(flags & 1)
    if flags & FLAG_END_PARAM:
        parameters["sequence_end"] = bool(flags & 2)
    return flags & ~PARAM_FLAGS


def encode_request_fields(data: RequestData, item: Any) -> None:
    """Request id, correlation id and flags into a RequestItem."""
    if data.request_id:
        item.request_id = data.request_id
    if isinstance(data.correlation_id, str):
        item.correlation_id_str = data.correlation_id
    elif data.correlation_id:
        item.correlation_id = data.correlation_id & ((1 << 64) - 1)  # (an int64 the client sent negative wraps)
    if data.flags:
        item.flags = data.flags


def decode_request_fields(item: Any, parameters: dict[str, Any] | None = None) -> tuple[str, int | str, int]:
    """(request id, correlation id, flags) of a RequestItem; with `parameters` (the item's, decoded), the sequence
    parameters its fields carry are put back there (see `carry_sequence_parameters`)."""
    correlation_id = item.correlation_id_str or item.correlation_id
    flags = item.flags
    if flags & PARAM_FLAGS and parameters is not None:
        flags = restore_sequence_parameters(parameters, correlation_id, flags)
    return item.request_id, correlation_id, flags


__all__ = ["CLIENT_FLAGS", "FLAG_END_PARAM", "FLAG_NOT_READY", "FLAG_SEQUENCE_CONTROLS", "FLAG_SEQUENCE_ID_PARAM",
           "FLAG_START_PARAM", "PARAM_FLAGS", "ArenaSlot", "MetricOp", "ModelLoading", "Param", "ParamValue", "RequestData",
           "RequestItem", "ResponseItem", "ServerToWorker", "TensorData", "TensorRef", "WorkerToServer",
           "carry_sequence_parameters", "decode_chain", "decode_request_fields", "encode_chain",
           "encode_request_fields", "params_from_proto", "params_to_proto", "restore_sequence_parameters",
           "sequence_fields"]
