"""`tritonserver._api._tensor`."""

from pytriton.tritonserver._enums import DataType, DLDeviceType, MemoryType
from pytriton.tritonserver._errors import UnsupportedError
from pytriton.tritonserver._memory import DeviceOrMemoryType, MemoryBuffer
from pytriton.tritonserver._tensor import Tensor

__all__ = ["DLDeviceType", "DataType", "DeviceOrMemoryType", "MemoryBuffer", "MemoryType", "Tensor",
           "UnsupportedError"]  # fmt: skip
