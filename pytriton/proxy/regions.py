"""Worker-side mappings of client-registered shared-memory regions, opened once and cached by region id.

System regions are POSIX shared-memory objects mapped with mmap (never through Python's
`multiprocessing.shared_memory`, whose resource tracker could unlink the client's object). CUDA regions
are cudaIpcMemHandle_t handles opened with cupy on the worker's device.
"""

from __future__ import annotations

import logging
import mmap
import os
from typing import Any

logger = logging.getLogger("pytriton.proxy")


def _cupy() -> Any:
    try:
        import cupy  # noqa: PLC0415 - optional dependency (extra "gpu")
    except ImportError:
        raise RegionError("CUDA shared memory needs cupy (install pytriton[gpu]) and a GPU") from None
    return cupy


class RegionError(Exception):
    """A client region cannot be used (it vanished, shrank, or no GPU is available)."""


class ClientRegions:
    """Client regions this worker has mapped."""

    def __init__(self) -> None:
        self._system: dict[int, memoryview] = {}
        self._cuda: dict[int, Any] = {}

    def system_view(self, ref: Any) -> memoryview:
        """A writable view of [offset, offset + nbytes) of the region `ref` points into."""
        view = self._system.get(ref.region_id)
        if view is None:
            path = "/dev/shm/" + ref.region.lstrip("/")
            try:
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError as exc:
                raise RegionError(f"Unable to open shared memory region: '{ref.region}' ({exc.strerror})") from None
            try:
                if os.fstat(fd).st_size < ref.region_size:
                    raise RegionError(f"shared memory region '{ref.region}' is smaller than it was at registration")
                mapping = mmap.mmap(fd, ref.region_size) if ref.region_size else None
            finally:
                os.close(fd)
            view = memoryview(mapping) if mapping is not None else memoryview(b"")
            self._system[ref.region_id] = view
        if ref.offset + ref.nbytes > len(view):
            raise RegionError(f"tensor '{ref.name}' lies outside shared memory region '{ref.region}'")
        return view[ref.offset : ref.offset + ref.nbytes]

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
            self._system.pop(region_id, None)  # unmapped once the last numpy view of it is gone
            entry = self._cuda.pop(region_id, None)
            if entry is not None:
                try:
                    _cupy().cuda.runtime.ipcCloseMemHandle(entry[1])
                except Exception:  # noqa: BLE001
                    logger.warning("could not close CUDA IPC handle of region %d", region_id, exc_info=True)

    def close(self) -> None:
        self.unmap(list(self._system) + list(self._cuda))
