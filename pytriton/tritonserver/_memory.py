"""Memory for tensors: ``MemoryBuffer`` (a pointer and its owner), ``MemoryAllocator`` and the defaults.

A buffer never owns memory; it holds the object that does (a numpy, cupy or torch array). The
default allocators are numpy for CPU and, when cupy or torch is installed, CUDA memory for GPU and
page-locked host memory for CPU_PINNED. ``place_in_allocated`` copies host bytes into what a
(user) allocator returns, so outputs land in the caller's buffers.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Union

import numpy

from pytriton.tritonserver import _dlpack
from pytriton.tritonserver._enums import DataType, DLDeviceType, MemoryType
from pytriton.tritonserver._errors import InternalError, InvalidArgumentError, UnsupportedError

LOGGER = logging.getLogger("pytriton.tritonserver")

DeviceOrMemoryType = Union[tuple[MemoryType, int], MemoryType, tuple[DLDeviceType, int], str]

_HOST = (MemoryType.CPU, MemoryType.CPU_PINNED)


@dataclass
class MemoryBuffer:
    """Memory allocated for a Tensor; it holds a reference to the owner, never frees the memory.

    Args:
        data_ptr: Pointer to the allocated memory.
        memory_type: memory type
        memory_type_id: memory type id (typically the same as device id)
        size: Size of the allocated memory in bytes.
        owner: Object that owns or manages the memory; the memory stays valid while it is referenced.

    Examples:
        >>> buffer = MemoryBuffer.from_dlpack(numpy.array([100],dtype=numpy.uint8))
    """

    data_ptr: int
    memory_type: MemoryType
    memory_type_id: int
    size: int
    owner: Any

    @staticmethod
    def from_dlpack(owner: Any) -> MemoryBuffer:
        """A buffer over the memory of a DLPack object (numpy, cupy, torch...), which becomes its owner.

        Raises:
            InvalidArgumentError: if ``owner`` does not support DLPack or is not contiguous.
        """
        if not hasattr(owner, "__dlpack__"):
            raise InvalidArgumentError("Object does not support DLpack protocol")
        return MemoryBuffer._from_view(owner, _dlpack.read_dlpack(owner))

    @staticmethod
    def _from_view(owner: Any, view: _dlpack.DLPackView) -> MemoryBuffer:
        if not view.contiguous:
            raise InvalidArgumentError("Only contiguous memory is supported")
        return MemoryBuffer(view.data_ptr, view.memory_type, view.memory_type_id, view.byte_size, owner)

    def _raw(self, size: int | None = None) -> RawBytes:
        """The first ``size`` bytes (all by default) as a uint8 DLPack exporter that keeps this buffer alive."""
        return RawBytes(self, self.size if size is None else size)


class RawBytes:
    """A uint8 DLPack view of a buffer's bytes, for copies with numpy, cupy or torch."""

    def __init__(self, buffer: MemoryBuffer, size: int):
        self.buffer = buffer
        self.size = size

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None, **_kwargs: Any) -> Any:
        buffer = self.buffer
        return _dlpack.make_capsule(
            self, buffer.data_ptr, DataType.UINT8, [self.size], buffer.memory_type, buffer.memory_type_id, max_version
        )

    def __dlpack_device__(self) -> tuple[DLDeviceType, int]:
        return _dlpack.device_type_of(self.buffer.memory_type), self.buffer.memory_type_id

    def host_array(self) -> numpy.ndarray:
        """A writable numpy uint8 view (host memory only)."""
        if self.size == 0:
            return numpy.empty(0, numpy.uint8)
        return numpy.ctypeslib.as_array((ctypes.c_uint8 * self.size).from_address(self.buffer.data_ptr))


class MemoryAllocator(ABC):
    """Abstract interface to allow for custom memory allocation strategies.

    ``allocate`` returns a ``MemoryBuffer``; it does not have to honour the requested memory type
    or memory type id.

    Examples:
        class TorchAllocator(tritonserver.MemoryAllocator):
            def allocate(self, size, memory_type, memory_type_id):
                device = "cuda" if memory_type == tritonserver.MemoryType.GPU else "cpu"
                tensor = torch.zeros(size, dtype=torch.uint8, device=device)
                return tritonserver.MemoryBuffer.from_dlpack(tensor)
    """

    @abstractmethod
    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        """Allocate a memory buffer of ``size`` bytes.

        Args:
            size: number of bytes requested
            memory_type: type of memory requested (CPU, GPU, etc.)
            memory_type_id: memory type id requested (typically device id)

        Returns:
            memory buffer with requested size

        Examples:
            memory_buffer = allocator.allocate(100, MemoryType.CPU, 0)
        """


class CPUAllocator(MemoryAllocator):
    """Host memory from numpy (the buffer's owner is the numpy array)."""

    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        return MemoryBuffer.from_dlpack(numpy.empty(size, numpy.byte))


def _cupy() -> Any:
    return sys.modules.get("cupy") or (importlib.import_module("cupy") if _installed("cupy") else None)


def _torch() -> Any:
    return sys.modules.get("torch") or (importlib.import_module("torch") if _installed("torch") else None)


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class GPUAllocator(MemoryAllocator):
    """CUDA device memory from cupy, or torch where cupy is not installed."""

    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        cupy = _cupy()
        if cupy is not None:
            with cupy.cuda.Device(memory_type_id):
                return MemoryBuffer.from_dlpack(cupy.empty(size, cupy.uint8))
        torch = _torch()
        if torch is None:
            raise UnsupportedError("GPU memory needs cupy or torch")
        return MemoryBuffer.from_dlpack(torch.empty(size, dtype=torch.uint8, device=f"cuda:{memory_type_id}"))


class PinnedAllocator(MemoryAllocator):
    """Page-locked host memory (cupy's pinned pool, or torch's ``pin_memory``)."""

    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        cupy = _cupy()
        if cupy is not None:
            import cupyx  # noqa: PLC0415 - installed with cupy

            owner = cupyx.empty_pinned(size, numpy.uint8)
        else:
            torch = _torch()
            if torch is None:
                raise UnsupportedError("pinned memory needs cupy or torch")
            owner = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        buffer = MemoryBuffer.from_dlpack(owner)
        buffer.memory_type = MemoryType.CPU_PINNED  # DLPack reports page-locked memory as plain CPU
        return buffer


default_memory_allocators: dict[MemoryType, MemoryAllocator] = {MemoryType.CPU: CPUAllocator()}
if _installed("cupy") or _installed("torch"):
    default_memory_allocators[MemoryType.GPU] = GPUAllocator()
    default_memory_allocators[MemoryType.CPU_PINNED] = PinnedAllocator()


def parse_device_or_memory_type(device: DeviceOrMemoryType) -> tuple[MemoryType, int]:
    """``(memory_type, memory_type_id)`` from a MemoryType, a (MemoryType | DLDeviceType, id) tuple, or "gpu:0".

    Raises:
        InvalidArgumentError: for anything else.
    """
    if isinstance(device, tuple) and len(device) == 2 and isinstance(device[1], int):
        kind, device_id = device
        if isinstance(kind, MemoryType):
            return kind, device_id
        if isinstance(kind, DLDeviceType):
            return _dlpack.memory_type_of(kind), device_id
    elif isinstance(device, MemoryType):
        return device, 0
    elif isinstance(device, str):
        parts = device.split(":")
        names = {
            "CPU": MemoryType.CPU,
            "CPU_PINNED": MemoryType.CPU_PINNED,
            "GPU": MemoryType.GPU,
            "CUDA": MemoryType.GPU,
        }
        if len(parts) <= 2 and parts[0].upper() in names:
            try:
                return names[parts[0].upper()], int(parts[1]) if len(parts) == 2 else 0
            except ValueError:
                pass
        raise InvalidArgumentError(f"Invalid memory type string {device}")
    raise InvalidArgumentError(f"Invalid memory type {device}")


def copy_bytes(destination: MemoryBuffer, source: MemoryBuffer, size: int) -> None:
    """Copy ``size`` bytes between buffers in any memory (host to host directly, else with cupy or torch).

    Raises:
        UnsupportedError: for device memory when neither cupy nor torch is installed.
    """
    if size == 0:
        return
    if destination.memory_type in _HOST and source.memory_type in _HOST:
        ctypes.memmove(destination.data_ptr, source.data_ptr, size)
        return
    cupy = _cupy()
    if cupy is not None:
        device = destination.memory_type_id if destination.memory_type == MemoryType.GPU else source.memory_type_id
        with cupy.cuda.Device(device):
            cupy.cuda.runtime.memcpy(destination.data_ptr, source.data_ptr, size, 4)  # cudaMemcpyDefault
        return
    torch = _torch()
    if torch is not None:
        torch.from_dlpack(destination._raw(size)).copy_(torch.from_dlpack(source._raw(size)))
        if MemoryType.GPU in (destination.memory_type, source.memory_type):
            torch.cuda.synchronize()
        return
    raise UnsupportedError(
        f"Conversion from {(source.memory_type, source.memory_type_id)} to "
        f"{(destination.memory_type, destination.memory_type_id)} not supported."
    )


def resolve_allocator(
    allocator: MemoryAllocator | None, memory_type: MemoryType | None
) -> tuple[MemoryAllocator, MemoryType]:
    """The allocator to use for outputs: the user's, else the default for the requested memory type.

    Raises:
        InvalidArgumentError: a memory type without a default allocator and no allocator given.
    """
    if allocator is not None:
        return allocator, MemoryType.CPU if memory_type is None else memory_type
    memory_type = MemoryType.CPU if memory_type is None else memory_type
    if memory_type not in default_memory_allocators:
        raise InvalidArgumentError(
            f"Memory type {memory_type} not supported by default_memory_allocators: {default_memory_allocators}"
        )
    return default_memory_allocators[memory_type], memory_type


def place_in_allocated(
    data: numpy.ndarray, allocator: MemoryAllocator, memory_type: MemoryType, memory_type_id: int, name: str = ""
) -> MemoryBuffer:
    """Ask ``allocator`` for ``data.nbytes`` bytes and copy the host array's bytes there.

    Raises:
        InternalError: the allocator failed, returned no buffer or one too small (Triton reports
            allocator failures as internal errors).
    """
    data = numpy.ascontiguousarray(data)
    about = f" for output '{name}'" if name else ""
    try:
        buffer = allocator.allocate(data.nbytes, memory_type, memory_type_id)
    except Exception as e:  # noqa: BLE001 - a user allocator may raise anything
        raise InternalError(f"memory allocation of {data.nbytes} bytes{about} failed: {e}") from e
    if not isinstance(buffer, MemoryBuffer):
        raise InternalError(f"memory allocator returned {type(buffer).__name__}, not a MemoryBuffer{about}")
    if buffer.size < data.nbytes:
        raise InternalError(f"memory allocator returned {buffer.size} bytes{about}, {data.nbytes} requested")
    host = MemoryBuffer(data.ctypes.data, MemoryType.CPU, 0, data.nbytes, data)
    try:
        copy_bytes(buffer, host, data.nbytes)
    except UnsupportedError as e:
        raise InternalError(f"cannot copy{about} into {buffer.memory_type}: {e}") from e
    return buffer
