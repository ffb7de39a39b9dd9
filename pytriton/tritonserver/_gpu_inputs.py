"""GPU inputs of in-process requests through CUDA IPC: no host round trip.

An input Tensor in GPU memory (cupy, torch, anything DLPack exports on a CUDA device) reaches the model the way a
network client's CUDA shared-memory input does (docs/guide/shared-memory.md): the caller's process exports the
allocation holding the tensor with cudaIpcGetMemHandle, the core records it as a CUDA region owned by the request
(`SharedMemoryRegistry.own_cuda`: not listed, not reachable by name), and the worker opens the handle on its device
and hands the model a cupy array on that memory. The region goes, and the workers close the handle, when the last
request using it ends; until then the region keeps the tensor (and so its memory) alive.

cudaIpcGetMemHandle takes the base of an allocation, not a pointer into it (caching allocators such as cupy's
pool and torch's hand out tensors inside larger allocations): the base and size come from cuMemGetAddressRange and
the tensor's offset in the allocation travels with the request.

The path needs cupy (here and in the workers) and a server that sees a GPU; otherwise, and for ensembles, BYTES and
empty tensors, the input is copied to host memory as before. Memory IPC cannot export (e.g. torch's expandable
segments, made with cuMemCreate, or cudaMallocAsync pools) is first copied on the device into a cudaMalloc
allocation; where even that fails, the input goes through host memory (with a warning).
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
from typing import Any

from pytriton.tritonserver._enums import DataType, MemoryType

logger = logging.getLogger("pytriton.tritonserver")

_MEMCPY_DEVICE_TO_DEVICE = 3  # cudaMemcpyDeviceToDevice
_libcuda: Any = None


@dataclasses.dataclass
class DeviceInput:
    """A GPU input exported for the workers: its allocation's IPC handle, and where the tensor lies in it."""

    handle: bytes
    device_id: int
    allocation_size: int
    offset: int
    nbytes: int
    keep: list[Any]  # the tensor (and a device copy made for export): alive while a worker may read it


def cupy_module() -> Any:
    """cupy, or None when it is not installed."""
    try:
        import cupy  # optional dependency (extra "gpu")
    except ImportError:
        return None
    return cupy


def export_or_none(tensor: Any, cupy: Any, name: str) -> DeviceInput | None:
    """`export`, or None (said in a warning) where CUDA refuses: the caller then copies the input to the host."""
    try:
        return export(tensor, cupy)
    except Exception as exc:  # noqa: BLE001 - a CUDA error: the input still reaches the model, through the host
        logger.warning("GPU input '%s' cannot be passed through CUDA IPC (%s): copied through host memory", name, exc)
        return None


def takes_ipc(tensor: Any) -> bool:
    """Whether `tensor` is one the CUDA IPC path can carry: non-empty, fixed-size, in GPU memory."""
    return tensor.memory_type == MemoryType.GPU and int(tensor.size) > 0 and tensor.data_type != DataType.BYTES


def address_range(pointer: int) -> tuple[int, int]:
    """Base and size of the device allocation holding `pointer` (the driver's cuMemGetAddressRange; the device's
    context must be current on this thread)."""
    global _libcuda
    if _libcuda is None:
        _libcuda = ctypes.CDLL("libcuda.so.1")
    base = ctypes.c_uint64()
    size = ctypes.c_size_t()
    status = _libcuda.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(pointer))
    if status != 0:
        raise RuntimeError(f"cuMemGetAddressRange failed (CUresult {status})")
    return int(base.value), int(size.value)


def _export_pointer(cupy: Any, pointer: int) -> tuple[bytes, int, int]:
    base, size = address_range(pointer)
    return bytes(cupy.cuda.runtime.ipcGetMemHandle(base)), size, pointer - base


def export(tensor: Any, cupy: Any) -> DeviceInput:
    """Export a GPU tensor's allocation for the workers (on the caller's thread).

    The device is synchronized first, so what the caller's streams still compute into the tensor is there when a
    worker reads it."""
    pointer, nbytes, device = int(tensor.data_ptr), int(tensor.size), int(tensor.memory_type_id)
    keep: list[Any] = [tensor]
    with cupy.cuda.Device(device):
        cupy.cuda.runtime.pointerGetAttributes(pointer)  # a runtime call: the device's context is current now
        cupy.cuda.runtime.deviceSynchronize()
        try:
            handle, size, offset = _export_pointer(cupy, pointer)
        except Exception as exc:  # noqa: BLE001 - e.g. cudaErrorInvalidValue for VMM memory: export a copy
            logger.debug("GPU input at %#x cannot be exported through CUDA IPC (%s): copied on the device first",
                         pointer, exc)
            copy = cupy.cuda.Memory(nbytes)  # a cudaMalloc of its own (not a pool's, which may be stream-ordered)
            cupy.cuda.runtime.memcpy(int(copy.ptr), pointer, nbytes, _MEMCPY_DEVICE_TO_DEVICE)
            cupy.cuda.runtime.deviceSynchronize()  # (a device-to-device copy may return before it is done)
            keep.append(copy)
            handle, size, offset = _export_pointer(cupy, int(copy.ptr))
    return DeviceInput(handle, device, size, offset, nbytes, keep)


__all__ = ["DeviceInput", "address_range", "cupy_module", "export", "export_or_none", "takes_ipc"]
