"""`tritonserver._c.triton_bindings`: the names programs use from Triton's pybind11 module — its exceptions, its
enums (with the values pybind11's `export_values()` binds at module level) and its helper functions. The objects are
those of the top-level package; the raw `TRITONSERVER_*` object wrappers (server, request, allocator...) have no
counterpart here (docs/guide/in-process.md, "Module layout")."""

from __future__ import annotations

import enum
import logging
from typing import Any

from pytriton.tritonserver._enums import (
    TRITONSERVER_DataType,
    TRITONSERVER_InferenceTraceActivity,
    TRITONSERVER_InferenceTraceLevel,
    TRITONSERVER_InstanceGroupKind,
    TRITONSERVER_LogFormat,
    TRITONSERVER_LogLevel,
    TRITONSERVER_MemoryType,
    TRITONSERVER_MetricFormat,
    TRITONSERVER_MetricKind,
    TRITONSERVER_ModelBatchFlag,
    TRITONSERVER_ModelControlMode,
    TRITONSERVER_ModelIndexFlag,
    TRITONSERVER_ModelTxnPropertyFlag,
    TRITONSERVER_ParameterType,
    TRITONSERVER_RateLimitMode,
    TRITONSERVER_RequestFlag,
    TRITONSERVER_RequestReleaseFlag,
    TRITONSERVER_ResponseCompleteFlag,
)
from pytriton.tritonserver._errors import (
    AlreadyExistsError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    TritonError,
    UnavailableError,
    UnknownError,
    UnsupportedError,
)
from pytriton.tritonserver._pybind import accepts, accepts_enum, incompatible, type_name

# The C API version of Triton 2.51 (tritonserver.h of core r24.10).
API_VERSION = (1, 34)

_DATA_TYPE_SIZES = {"BOOL": 1, "INT8": 1, "UINT8": 1, "INT16": 2, "UINT16": 2, "FP16": 2, "BF16": 2, "INT32": 4,
                    "UINT32": 4, "FP32": 4, "INT64": 8, "UINT64": 8, "FP64": 8}  # fmt: skip

_LOG_LEVELS = {TRITONSERVER_LogLevel.INFO: logging.INFO, TRITONSERVER_LogLevel.WARN: logging.WARNING,
               TRITONSERVER_LogLevel.ERROR: logging.ERROR, TRITONSERVER_LogLevel.VERBOSE: logging.DEBUG}  # fmt: skip
LOGGER = logging.getLogger("pytriton.tritonserver")


def _enum_argument(function: str, enum_type: type[enum.Enum], value: Any, returns: str) -> None:
    if not accepts_enum(enum_type, value):
        raise incompatible(function, [("arg0", type_name(enum_type))], returns, [value])


def _name_or(function: str, enum_type: type[enum.Enum], value: Any, otherwise: str) -> str:
    _enum_argument(function, enum_type, value, "str")
    return str(value.name) if value.name != "INVALID" else otherwise


def TRITONSERVER_DataTypeString(datatype: TRITONSERVER_DataType) -> str:  # noqa: N802 - Triton's names
    return _name_or("TRITONSERVER_DataTypeString", TRITONSERVER_DataType, datatype, "<invalid>")


def TRITONSERVER_StringToDataType(dtype: str) -> TRITONSERVER_DataType:  # noqa: N802
    if not accepts("str", dtype):
        raise incompatible("TRITONSERVER_StringToDataType", [("arg0", "str")], type_name(TRITONSERVER_DataType),
                           [dtype])
    name = dtype.decode() if isinstance(dtype, bytes) else dtype
    member = TRITONSERVER_DataType.__members__.get(name)
    return member if member is not None and name != "INVALID" else TRITONSERVER_DataType.INVALID


def TRITONSERVER_DataTypeByteSize(datatype: TRITONSERVER_DataType) -> int:  # noqa: N802
    _enum_argument("TRITONSERVER_DataTypeByteSize", TRITONSERVER_DataType, datatype, "int")
    return _DATA_TYPE_SIZES.get(datatype.name, 0)


def TRITONSERVER_MemoryTypeString(memtype: TRITONSERVER_MemoryType) -> str:  # noqa: N802
    return _name_or("TRITONSERVER_MemoryTypeString", TRITONSERVER_MemoryType, memtype, "<invalid>")


def TRITONSERVER_ParameterTypeString(paramtype: TRITONSERVER_ParameterType) -> str:  # noqa: N802
    return _name_or("TRITONSERVER_ParameterTypeString", TRITONSERVER_ParameterType, paramtype, "<invalid>")


def TRITONSERVER_InstanceGroupKindString(kind: TRITONSERVER_InstanceGroupKind) -> str:  # noqa: N802
    return _name_or("TRITONSERVER_InstanceGroupKindString", TRITONSERVER_InstanceGroupKind, kind, "<invalid>")


def TRITONSERVER_InferenceTraceLevelString(level: TRITONSERVER_InferenceTraceLevel) -> str:  # noqa: N802
    return _name_or("TRITONSERVER_InferenceTraceLevelString", TRITONSERVER_InferenceTraceLevel, level, "<unknown>")


def TRITONSERVER_InferenceTraceActivityString(activity: TRITONSERVER_InferenceTraceActivity) -> str:  # noqa: N802
    return _name_or("TRITONSERVER_InferenceTraceActivityString", TRITONSERVER_InferenceTraceActivity, activity,
                    "<unknown>")


def TRITONSERVER_LogIsEnabled(level: TRITONSERVER_LogLevel) -> bool:  # noqa: N802
    """Whether the server log takes lines of `level` (the `pytriton` logger's level, as the options set it)."""
    _enum_argument("TRITONSERVER_LogIsEnabled", TRITONSERVER_LogLevel, level, "bool")
    return logging.getLogger("pytriton").isEnabledFor(_LOG_LEVELS[level])


def TRITONSERVER_LogMessage(level: TRITONSERVER_LogLevel, filename: str, line: int, msg: str) -> None:  # noqa: N802
    """One line into the server log, attributed to `filename`:`line` (as Triton's log prints them)."""
    parameters = [("arg0", type_name(TRITONSERVER_LogLevel)), ("arg1", "str"), ("arg2", "int"), ("arg3", "str")]
    if not (accepts_enum(TRITONSERVER_LogLevel, level) and accepts("str", filename) and accepts("int", line)
            and accepts("str", msg)):  # fmt: skip
        raise incompatible("TRITONSERVER_LogMessage", parameters, "None", [level, filename, line, msg])
    record = LOGGER.makeRecord(LOGGER.name, _LOG_LEVELS[level], str(filename), int(line), str(msg), (), None)
    LOGGER.handle(record)


def api_version() -> tuple[int, int]:
    """The C API version (major, minor) this API follows: Triton 2.51's."""
    return API_VERSION


# pybind11's export_values(): these enums' members are also module attributes.
for _enum in (TRITONSERVER_InferenceTraceLevel, TRITONSERVER_InferenceTraceActivity, TRITONSERVER_RequestFlag,
              TRITONSERVER_RequestReleaseFlag, TRITONSERVER_ResponseCompleteFlag, TRITONSERVER_ModelBatchFlag,
              TRITONSERVER_ModelIndexFlag, TRITONSERVER_ModelTxnPropertyFlag):  # fmt: skip
    for _member in _enum:
        globals()[_member.name] = _member
EXPORTED_VALUES = [m.name for e in (TRITONSERVER_InferenceTraceLevel, TRITONSERVER_InferenceTraceActivity,
                                    TRITONSERVER_RequestFlag, TRITONSERVER_RequestReleaseFlag,
                                    TRITONSERVER_ResponseCompleteFlag, TRITONSERVER_ModelBatchFlag,
                                    TRITONSERVER_ModelIndexFlag, TRITONSERVER_ModelTxnPropertyFlag) for m in e]

__all__ = [
    "AlreadyExistsError", "InternalError", "InvalidArgumentError", "NotFoundError", "TritonError",
    "UnavailableError", "UnknownError", "UnsupportedError",
    "TRITONSERVER_DataType", "TRITONSERVER_InferenceTraceActivity", "TRITONSERVER_InferenceTraceLevel",
    "TRITONSERVER_InstanceGroupKind", "TRITONSERVER_LogFormat", "TRITONSERVER_LogLevel", "TRITONSERVER_MemoryType",
    "TRITONSERVER_MetricFormat", "TRITONSERVER_MetricKind", "TRITONSERVER_ModelBatchFlag",
    "TRITONSERVER_ModelControlMode", "TRITONSERVER_ModelIndexFlag", "TRITONSERVER_ModelTxnPropertyFlag",
    "TRITONSERVER_ParameterType", "TRITONSERVER_RateLimitMode", "TRITONSERVER_RequestFlag",
    "TRITONSERVER_RequestReleaseFlag", "TRITONSERVER_ResponseCompleteFlag",
    "TRITONSERVER_DataTypeByteSize", "TRITONSERVER_DataTypeString", "TRITONSERVER_InferenceTraceActivityString",
    "TRITONSERVER_InferenceTraceLevelString", "TRITONSERVER_InstanceGroupKindString", "TRITONSERVER_LogIsEnabled",
    "TRITONSERVER_LogMessage", "TRITONSERVER_MemoryTypeString", "TRITONSERVER_ParameterTypeString",
    "TRITONSERVER_StringToDataType", "api_version", *EXPORTED_VALUES,
]  # fmt: skip
