"""The enums of the in-process `tritonserver` API, with Triton's member names and values.

Triton's package exposes pybind11 enums named after the C API (``TRITONSERVER_DataType``) and
re-exports them under short names (``DataType``); both names are kept here, as the same class.
Values are those of ``tritonserver.h``. The DLPack device type follows ``dlpack.h``.
"""

from __future__ import annotations

import enum


class _TritonEnum(enum.IntEnum):
    """An int enum that prints as Triton's pybind11 enums do: ``TRITONSERVER_DataType.FP32``."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, format_spec: str) -> str:
        return str(self) if not format_spec else format(int(self), format_spec)


class TRITONSERVER_DataType(_TritonEnum):  # noqa: N801 - Triton's name
    """Tensor element types (TRITONSERVER_DataType)."""

    INVALID = 0
    BOOL = 1
    UINT8 = 2
    UINT16 = 3
    UINT32 = 4
    UINT64 = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FP16 = 10
    FP32 = 11
    FP64 = 12
    BYTES = 13
    BF16 = 14


class TRITONSERVER_MemoryType(_TritonEnum):  # noqa: N801
    """Where a buffer lives (TRITONSERVER_MemoryType)."""

    CPU = 0
    CPU_PINNED = 1
    GPU = 2


class TRITONSERVER_ParameterType(_TritonEnum):  # noqa: N801
    STRING = 0
    INT = 1
    BOOL = 2
    DOUBLE = 3
    BYTES = 4


class TRITONSERVER_InstanceGroupKind(_TritonEnum):  # noqa: N801
    AUTO = 0
    CPU = 1
    GPU = 2
    MODEL = 3


class TRITONSERVER_LogLevel(_TritonEnum):  # noqa: N801
    INFO = 0
    WARN = 1
    ERROR = 2
    VERBOSE = 3


class TRITONSERVER_LogFormat(_TritonEnum):  # noqa: N801
    DEFAULT = 0
    ISO8601 = 1


class TRITONSERVER_MetricFormat(_TritonEnum):  # noqa: N801
    PROMETHEUS = 0


class TRITONSERVER_MetricKind(_TritonEnum):  # noqa: N801
    COUNTER = 0
    GAUGE = 1


class TRITONSERVER_ModelControlMode(_TritonEnum):  # noqa: N801
    NONE = 0
    POLL = 1
    EXPLICIT = 2


class TRITONSERVER_RateLimitMode(_TritonEnum):  # noqa: N801
    OFF = 0
    EXEC_COUNT = 1


class TRITONSERVER_InferenceTraceLevel(_TritonEnum):  # noqa: N801
    """Trace levels (bindings only: the in-process API takes no trace settings)."""

    DISABLED = 0
    MIN = 1
    MAX = 2
    TIMESTAMPS = 4
    TENSORS = 8


class TRITONSERVER_InferenceTraceActivity(_TritonEnum):  # noqa: N801
    """Trace activities (bindings only)."""

    REQUEST_START = 0
    QUEUE_START = 1
    COMPUTE_START = 2
    COMPUTE_INPUT_END = 3
    COMPUTE_OUTPUT_START = 4
    COMPUTE_END = 5
    REQUEST_END = 6
    TENSOR_QUEUE_INPUT = 7
    TENSOR_BACKEND_INPUT = 8
    TENSOR_BACKEND_OUTPUT = 9


class TRITONSERVER_RequestFlag(_TritonEnum):  # noqa: N801
    """Sequence flags of an inference request; combined with ``|`` into ``InferenceRequest.flags``."""

    SEQUENCE_START = 1
    SEQUENCE_END = 2


class TRITONSERVER_RequestReleaseFlag(_TritonEnum):  # noqa: N801
    ALL = 1
    RESCHEDULE = 2


class TRITONSERVER_ResponseCompleteFlag(_TritonEnum):  # noqa: N801
    FINAL = 1


class TRITONSERVER_ModelBatchFlag(_TritonEnum):  # noqa: N801
    UNKNOWN = 1
    FIRST_DIM = 2


class TRITONSERVER_ModelIndexFlag(_TritonEnum):  # noqa: N801
    READY = 1


class TRITONSERVER_ModelTxnPropertyFlag(_TritonEnum):  # noqa: N801
    ONE_TO_ONE = 1
    DECOUPLED = 2


class DLDeviceType(enum.IntEnum):
    """DLPack device types (``dlpack.h``); a tensor's ``__dlpack_device__`` answers one of these."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16


# The short names the package exports (Triton re-exports its pybind11 enums under these).
DataType = TRITONSERVER_DataType
MemoryType = TRITONSERVER_MemoryType
ParameterType = TRITONSERVER_ParameterType
InstanceGroupKind = TRITONSERVER_InstanceGroupKind
LogLevel = TRITONSERVER_LogLevel
LogFormat = TRITONSERVER_LogFormat
MetricFormat = TRITONSERVER_MetricFormat
MetricKind = TRITONSERVER_MetricKind
ModelControlMode = TRITONSERVER_ModelControlMode
RateLimitMode = TRITONSERVER_RateLimitMode
RequestFlag = TRITONSERVER_RequestFlag
RequestReleaseFlag = TRITONSERVER_RequestReleaseFlag
ResponseCompleteFlag = TRITONSERVER_ResponseCompleteFlag
ModelBatchFlag = TRITONSERVER_ModelBatchFlag
ModelIndexFlag = TRITONSERVER_ModelIndexFlag
ModelTxnPropertyFlag = TRITONSERVER_ModelTxnPropertyFlag
