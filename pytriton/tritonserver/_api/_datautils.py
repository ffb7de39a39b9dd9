"""`tritonserver._api._datautils`."""

from pytriton.tritonserver._enums import DataType, MemoryType
from pytriton.tritonserver._errors import InvalidArgumentError, UnsupportedError
from pytriton.tritonserver._memory import DeviceOrMemoryType, parse_device_or_memory_type

__all__ = ["DataType", "DeviceOrMemoryType", "InvalidArgumentError", "MemoryType", "UnsupportedError",
           "parse_device_or_memory_type"]  # fmt: skip
