"""`tritonserver._api._response`."""

from pytriton.tritonserver._api._logging import LogMessage
from pytriton.tritonserver._enums import DLDeviceType, LogLevel, MemoryType
from pytriton.tritonserver._memory import DeviceOrMemoryType, MemoryBuffer
from pytriton.tritonserver._request import InferenceRequest
from pytriton.tritonserver._response import AsyncResponseIterator, InferenceResponse, ResponseIterator
from pytriton.tritonserver._tensor import Tensor

__all__ = ["AsyncResponseIterator", "DLDeviceType", "DeviceOrMemoryType", "InferenceRequest", "InferenceResponse",
           "LogLevel", "LogMessage", "MemoryBuffer", "MemoryType", "ResponseIterator", "Tensor"]  # fmt: skip
