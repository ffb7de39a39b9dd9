"""Triton's in-process Python API (``import tritonserver``) over pytriton's server.

A `Server` runs pytriton's core, worker processes and model control in this process (its event loop in a
background thread); `Model.infer` / `async_infer` send requests straight to a model's scheduler. See
docs/guide/in-process.md.
"""

from pytriton.tritonserver._custom_metrics import Metric, MetricFamily
from pytriton.tritonserver._enums import (
    DataType,
    DLDeviceType,
    InstanceGroupKind,
    LogFormat,
    LogLevel,
    MemoryType,
    MetricFormat,
    MetricKind,
    ModelBatchFlag,
    ModelControlMode,
    ModelIndexFlag,
    ModelTxnPropertyFlag,
    ParameterType,
    RateLimitMode,
    RequestFlag,
    RequestReleaseFlag,
    ResponseCompleteFlag,
)
from pytriton.tritonserver._errors import (
    AlreadyExistsError,
    CancelledError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    TritonError,
    UnavailableError,
    UnknownError,
    UnsupportedError,
)
from pytriton.tritonserver._memory import MemoryAllocator, MemoryBuffer, default_memory_allocators
from pytriton.tritonserver._model import Model
from pytriton.tritonserver._options import ModelLoadDeviceLimit, Options, RateLimiterResource
from pytriton.tritonserver._request import InferenceRequest
from pytriton.tritonserver._response import AsyncResponseIterator, InferenceResponse, ResponseIterator
from pytriton.tritonserver._server import ModelDictionary, Server
from pytriton.tritonserver._tensor import Tensor

# NVIDIA's module tree (`_api._server`, `_c.triton_bindings`...), over the same objects: imported last.
from pytriton.tritonserver import _api, _c  # noqa: E402,I001  isort: skip

__all__ = [
    "AlreadyExistsError",
    "AsyncResponseIterator",
    "CancelledError",
    "DLDeviceType",
    "DataType",
    "InferenceRequest",
    "InferenceResponse",
    "InstanceGroupKind",
    "InternalError",
    "InvalidArgumentError",
    "LogFormat",
    "LogLevel",
    "MemoryAllocator",
    "MemoryBuffer",
    "MemoryType",
    "Metric",
    "MetricFamily",
    "MetricFormat",
    "MetricKind",
    "Model",
    "ModelBatchFlag",
    "ModelControlMode",
    "ModelDictionary",
    "ModelIndexFlag",
    "ModelLoadDeviceLimit",
    "ModelTxnPropertyFlag",
    "NotFoundError",
    "Options",
    "ParameterType",
    "RateLimitMode",
    "RateLimiterResource",
    "RequestFlag",
    "RequestReleaseFlag",
    "ResponseCompleteFlag",
    "ResponseIterator",
    "Server",
    "Tensor",
    "TritonError",
    "UnavailableError",
    "UnknownError",
    "UnsupportedError",
    "default_memory_allocators",
]
