"""Worker-side mappings of client-registered shared-memory regions, opened once and cached by region id.

System regions are POSIX shared-memory objects mapped with mmap (never through Python's
`multiprocessing.shared_memory`, whose resource tracker could unlink the client's object). CUDA regions
are cudaIpcMemHandle_t handles opened with cupy on the worker's device.

A client can shrink its object (ftruncate) at any time; touching mapped pages past its end kills the process
with SIGBUS. So every use of a system region first asks the object's size now (fstat on the mapping's own
descriptor) and refuses bytes the object no longer has. A shrink between that check and the access itself
cannot be caught in Python (docs/security.md, "Shared memory").
"""

from __future__ import annotations

import logging
import mmap
import os
from typing import Any

import numpy as np

logger = logging.getLogger("pytriton.proxy")


def _cupy() -> Any:
    try:
        import cupy  # noqa: PLC0415 - optional dependency (extra "gpu")
    except ImportError:
        raise RegionError("CUDA shared memory needs cupy (install pytriton[gpu]) and a GPU") from None
    return cupy


class RegionError(Exception):
    """A client region cannot be used (it vanished, shrank, or no GPU is available)."""


def _map_system(ref: Any, mapped: dict[tuple[int, int], tuple[mmap.mmap, memoryview]]
                ) -> tuple[mmap.mmap | None, memoryview]:  # fmt: skip
    """Map a system region's object from its start to the registered region's end (the mapping keeps a
    descriptor of its own, which `mmap.size()` asks). An object already mapped at least that far for another region
    (`mapped`, by device and inode: one object registered under several names) is not mapped again, so that a copy
    between two of its regions sees from the addresses where they overlap."""
    path = "/dev/shm/" + ref.region.lstrip("/")
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise RegionError(f"Unable to open shared memory region: '{ref.region}' ({exc.strerror})") from None
    try:
        stat = os.fstat(fd)
        size = stat.st_size
        if size < ref.region_size:
            raise RegionError(
                f"shared memory region with key '{ref.region}' is {size} bytes now, smaller than the {ref.region_size} "
                "bytes registered (offset + byte_size): it shrank after it was registered"
            )
        if not ref.region_size:
            return None, memoryview(b"")
        known = mapped.get((stat.st_dev, stat.st_ino))
        if known is not None and len(known[1]) >= ref.region_size:
            return known[0], known[1][:ref.region_size]
        mapping = mmap.mmap(fd, ref.region_size)
    finally:
        os.close(fd)
    mapped[stat.st_dev, stat.st_ino] = (mapping, memoryview(mapping))
    return mapping, memoryview(mapping)


class ClientRegions:
    """Client regions this worker has mapped."""

    def __init__(self) -> None:
        self._system: dict[int, tuple[mmap.mmap | None, memoryview]] = {}
        self._objects: dict[tuple[int, int], tuple[mmap.mmap, memoryview]] = {}  # (see _map_system)
        self._cuda: dict[int, Any] = {}

    def system_view(self, ref: Any) -> memoryview:
        """A writable view of [offset, offset + nbytes) of the region `ref` points into, after checking that the
        shared-memory object still holds those bytes."""
        entry = self._system.get(ref.region_id)
        if entry is None:
            entry = self._system[ref.region_id] = _map_system(ref, self._objects)
        mapping, view = entry
        end = ref.offset + ref.nbytes
        if end > len(view):
            raise RegionError(f"tensor '{ref.name}' lies outside shared memory region '{ref.region}'")
        if mapping is not None and end:
            size = mapping.size()  # fstat of the descriptor the mapping keeps: the object's size now
            if size < end:
                raise RegionError(
                    f"shared memory region with key '{ref.region}' is {size} bytes now, too small for tensor "
                    f"'{ref.name}' at bytes {ref.offset}..{end}: it shrank after it was registered"
                )
        return view[ref.offset : end]

    def cuda_pointer(self, ref: Any) -> Any:
        """A cupy MemoryPointer to the tensor in a CUDA region; the IPC handle is opened once per region."""
        cupy = _cupy()
        entry = self._cuda.get(ref.region_id)
        if entry is None:
            try:
                pointer = cupy.cuda.runtime.ipcOpenMemHandle(ref.cuda_handle)
            except Exception as exc:  # noqa: BLE001 - the CUDA error text is what the user needs
                raise RegionError(f"failed to open the CUDA shared memory region of tensor '{ref.name}': {exc}") from None
            memory = cupy.cuda.UnownedMemory(pointer, ref.region_size, self)
            entry = self._cuda[ref.region_id] = (memory, pointer)
        return cupy.cuda.MemoryPointer(entry[0], ref.offset)

    def cuda_array(self, ref: Any, dtype: Any, shape: tuple[int, ...]) -> Any:
        """The input as a cupy array on the region's memory (no copy)."""
        return _cupy().ndarray(shape, dtype=dtype, memptr=self.cuda_pointer(ref))

    def unmap(self, region_ids: list[int]) -> None:
        for region_id in region_ids:
            if self._system.pop(region_id, None) is not None:  # unmapped once the last numpy view of it is gone
                live = {id(entry[0]) for entry in self._system.values()}
                self._objects = {k: v for k, v in self._objects.items() if id(v[0]) in live}
            entry = self._cuda.pop(region_id, None)
            if entry is not None:
                try:
                    _cupy().cuda.runtime.ipcCloseMemHandle(entry[1])
                except Exception:  # noqa: BLE001
                    logger.warning("could not close CUDA IPC handle of region %d", region_id, exc_info=True)

    def close(self) -> None:
        self.unmap(list(self._system) + list(self._cuda))


class OutputRegionError(Exception):
    """An output does not fit the client region it was requested into."""


def too_small(name: str, have: int, need: int) -> str:
    return (
        f"shared memory size specified with the request for output '{name}' ({have} bytes) should be at least "
        f"{need} bytes to hold the results"
    )


def write_cuda_region(regions: ClientRegions, ref: Any, region: Any, array: Any) -> None:
    """Write output `array` (host or device) into the client CUDA region `region` and point `ref` at it."""
    nbytes = array.nbytes
    if nbytes > region.nbytes:
        raise OutputRegionError(too_small(ref.name, region.nbytes, nbytes))
    cupy = __import__("cupy")
    target = cupy.ndarray(array.shape, dtype=array.dtype, memptr=regions.cuda_pointer(region))
    if isinstance(array, np.ndarray):
        target.set(np.ascontiguousarray(array))  # host to device
    else:
        target[...] = array  # device to device
    # the reader is another process, which no stream orders this copy before: it is done when the result goes
    cupy.cuda.get_current_stream().synchronize()
    ref.nbytes = nbytes
    ref.cuda_handle = region.cuda_handle
    ref.region_id = region.region_id
    ref.offset = region.offset
