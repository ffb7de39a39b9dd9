"""`tritonserver._api._dlpack`: the DLPack structures (ctypes) and the device type enum."""

from pytriton.tritonserver._dlpack import DLDataType, DLDevice, DLManagedTensor, DLTensor
from pytriton.tritonserver._enums import DLDeviceType

__all__ = ["DLDataType", "DLDevice", "DLDeviceType", "DLManagedTensor", "DLTensor"]
