"""`tritonserver._api._request`."""

from pytriton.tritonserver._enums import DataType, DLDeviceType, MemoryType
from pytriton.tritonserver._errors import InvalidArgumentError
from pytriton.tritonserver._memory import DeviceOrMemoryType, MemoryAllocator
from pytriton.tritonserver._request import InferenceRequest
from pytriton.tritonserver._tensor import Tensor

__all__ = ["DLDeviceType", "DataType", "DeviceOrMemoryType", "InferenceRequest", "InvalidArgumentError",
           "MemoryAllocator", "MemoryType", "Tensor"]  # fmt: skip
