"""`tritonserver._api._memorybuffer` (the home of `MemoryBuffer` in NVIDIA's releases after 2.51)."""

from pytriton.tritonserver._enums import DLDeviceType, MemoryType
from pytriton.tritonserver._memory import DeviceOrMemoryType, MemoryBuffer

__all__ = ["DLDeviceType", "DeviceOrMemoryType", "MemoryBuffer", "MemoryType"]
