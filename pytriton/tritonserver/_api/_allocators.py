"""`tritonserver._api._allocators` (Triton 2.51's home of the memory classes)."""

from pytriton.tritonserver._api._logging import LogLevel, LogMessage
from pytriton.tritonserver._enums import MemoryType
from pytriton.tritonserver._memory import CPUAllocator, MemoryAllocator, MemoryBuffer, default_memory_allocators

__all__ = ["CPUAllocator", "LogLevel", "LogMessage", "MemoryAllocator", "MemoryBuffer", "MemoryType",
           "default_memory_allocators"]  # fmt: skip
