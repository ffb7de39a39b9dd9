"""Client shared-memory regions (Triton's system and CUDA shared-memory extensions).

The server only validates and records a region; the workers that execute a request map it themselves
(by key, cached per worker) and read inputs from / write outputs to it directly.

Unregistering a region that requests in flight use only marks it, as Triton does: it stays listed, usable and
registered (its name taken) until the last request using it ends; then it is removed and the workers are told to
unmap it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import itertools
import logging
import os
import stat
from typing import Any, Callable

from pytriton.exceptions import ServerError, Status, invalid_arg, not_found

logger = logging.getLogger("pytriton.core")

RESERVED_PREFIXES = ("triton_python_backend_shm_region_", "pytriton_")
CUDA_IPC_HANDLE_SIZE = 64
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


@dataclasses.dataclass
class SystemShmRegion:
    name: str
    key: str
    offset: int
    byte_size: int
    id: int
    in_use: int = 0
    removing: bool = False
    # A server-owned region (`SharedMemoryRegistry.own_system`): called once when it goes (its segment is freed)
    on_gone: Callable[[], None] | None = None

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "offset": self.offset, "byte_size": self.byte_size}


@dataclasses.dataclass
class CudaShmRegion:
    name: str
    raw_handle: bytes
    device_id: int
    byte_size: int
    id: int
    in_use: int = 0
    removing: bool = False
    # An in-process request's own region (`SharedMemoryRegistry.own_cuda`): what keeps the exported memory alive
    keep: list[Any] | None = None

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "device_id": self.device_id, "byte_size": self.byte_size}


Region = SystemShmRegion | CudaShmRegion


def shm_path(key: str) -> str:
    """/dev/shm path of a POSIX shm key, as glibc's shm_open resolves it (leading slashes stripped)."""
    return "/dev/shm/" + key.lstrip("/")


def check_key(name: str, key: str) -> None:
    stripped = key.lstrip("/")
    if not stripped:  # (names no object: Triton's answer to a key shm_open cannot open, as for one that is not there)
        raise ServerError(Status.INTERNAL, f"Unable to open shared memory region: '{key}'")
    # (a NUL would end the name for shm_open: the key would name another object than it says)
    if "/" in stripped or stripped in (".", "..") or "\0" in stripped:
        raise invalid_arg(f"cannot register shared memory region '{name}' - invalid shm key '{key}'")
    for prefix in RESERVED_PREFIXES:
        if stripped.startswith(prefix):
            raise invalid_arg(
                f"cannot register shared memory region '{name}' with key '{key}' as the key contains the reserved "
                f"prefix '{prefix}'"
            )


def decode_cuda_handle(raw_handle: bytes | str) -> bytes:
    """The 64 bytes of a cudaIpcMemHandle_t, from raw bytes (gRPC) or base64 text (HTTP `{"b64": ...}`)."""
    if isinstance(raw_handle, str):
        # perf_analyzer's C++ client (libb64) breaks its base64 text into lines: whitespace is not data
        raw_handle = "".join(raw_handle.split())
        try:
            raw_handle = base64.b64decode(raw_handle, validate=True)
        except (binascii.Error, ValueError):
            raise invalid_arg("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t") from None
    elif len(raw_handle) != CUDA_IPC_HANDLE_SIZE:  # (gRPC's bytes: Triton's words, which name no region)
        raise invalid_arg("failed to register shared memory region: invalid args")
    if len(raw_handle) != CUDA_IPC_HANDLE_SIZE:
        raise invalid_arg("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")
    return bytes(raw_handle)


class SharedMemoryRegistry:
    """Registered regions by name (one namespace for system and CUDA), with in-flight reference counts."""

    def __init__(self, gpu_available: Callable[[], bool] = lambda: False, allow_client_shm: bool = True):
        self._regions: dict[str, Region] = {}
        # in-process requests' regions by (handle, device): [their shared region id, how many live]
        self._owned: dict[tuple[bytes, int], list[int]] = {}
        self._ids = itertools.count(1)
        self.gpu_available = gpu_available
        self.allow_client_shm = allow_client_shm
        self.on_removed: list[Callable[[Region], None]] = []

    def _check_allowed(self) -> None:
        if not self.allow_client_shm:
            raise ServerError(
                Status.UNSUPPORTED,
                "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.",
            )

    # ---- registration ------------------------------------------------------------------------
    def register_system(self, name: str, key: str, offset: int, byte_size: int) -> SystemShmRegion:
        self._check_allowed()
        check_key(name, key)
        if name in self._regions:
            raise ServerError(Status.ALREADY_EXISTS, f"shared memory region '{name}' already in manager")
        if not (0 <= offset <= UINT64_MAX and 0 <= byte_size <= UINT64_MAX):
            raise invalid_arg(f"failed to register shared memory region '{name}': invalid args")
        try:
            fd = os.open(shm_path(key), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            raise ServerError(Status.INTERNAL, f"Unable to open shared memory region: '{key}'") from None
        try:
            info = os.fstat(fd)
        finally:
            os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ServerError(Status.INTERNAL, f"Unable to open shared memory region: '{key}'")
        if info.st_uid != os.geteuid():
            raise invalid_arg(
                f"failed to register shared memory region '{name}': the shared memory object '{key}' belongs to "
                f"another user (uid {info.st_uid}); only objects of the server's user (uid {os.geteuid()}) "
                "can be registered"
            )
        if offset + byte_size > info.st_size:
            raise invalid_arg(f"failed to register shared memory region '{name}': invalid args")
        if byte_size == 0:  # (Triton's words: its mmap's refusal of no bytes, the space between them missing)
            raise invalid_arg(
                f"failed to register shared memory region '{name}': unable to process address spaceInvalid argument")
        region = SystemShmRegion(name, key, offset, byte_size, next(self._ids))
        self._regions[name] = region
        logger.debug("registered system shared memory region '%s' (key %s, offset %d, %d bytes)",
                     name, key, offset, byte_size)
        return region

    def register_cuda(self, name: str, raw_handle: bytes | str, device_id: int, byte_size: int) -> CudaShmRegion:
        self._check_allowed()
        handle = decode_cuda_handle(raw_handle)
        if not self.gpu_available():
            raise invalid_arg(f"failed to register CUDA shared memory region: '{name}', GPUs not supported")
        if name in self._regions:
            raise ServerError(Status.ALREADY_EXISTS, f"shared memory region '{name}' already in manager")
        if device_id < 0 or byte_size < 0:
            raise invalid_arg(f"failed to register shared memory region '{name}': invalid args")
        region = CudaShmRegion(name, handle, device_id, byte_size, next(self._ids))
        self._regions[name] = region
        return region

    def own_cuda(self, handle: bytes, device_id: int, byte_size: int, keep: object) -> CudaShmRegion:
        """A CUDA region for one in-process request's GPU input, held by the caller (in use once) until it calls
        `release([region])`; `keep` (what keeps the exported memory alive) is held until the region goes.

        It has no name a client could use: it is not listed, cannot be unregistered, and only a `RegionRef` that
        carries it (`RegionRef.owned`) reaches it. It goes when its request and the core are done with it. Regions
        of the same allocation share one region id while any of them lives, so a worker opens the allocation's IPC
        handle once (CUDA refuses to open a handle twice in one process) and unmaps it when the last one goes."""
        key = (bytes(handle), device_id)
        entry = self._owned.get(key)
        if entry is None:
            entry = self._owned[key] = [next(self._ids), 0]
        entry[1] += 1
        return CudaShmRegion(f"pytriton_inprocess_{entry[0]}", key[0], device_id, byte_size, entry[0], in_use=1,
                             removing=True, keep=[keep])  # removing from the start: it goes when released

    def own_system(self, key: str, byte_size: int, on_gone: Callable[[], None]) -> SystemShmRegion:
        """A system region of the server's own (a segment a large request message was received into,
        `core/received.py`): not listed, not unregistrable, reached only through a `RegionRef` that carries it. It is
        in use while requests refer to it (`acquire`/`release`); once marked `removing` it goes with its last use,
        and `on_gone` is called (once), after the workers were told to unmap it."""
        region_id = next(self._ids)
        return SystemShmRegion(f"pytriton_received_{region_id}", key, 0, byte_size, region_id, on_gone=on_gone)

    def remove_owned(self, region: SystemShmRegion) -> None:
        """An own region is no longer wanted: it goes now when no request uses it, else with its last use."""
        if region.removing:
            return
        region.removing = True
        if region.in_use == 0:
            self._remove(region)

    # ---- status ------------------------------------------------------------------------------
    def system_status(self, name: str = "") -> list[dict[str, Any]]:
        """Registered system regions, by name (those awaiting removal too, as Triton lists them)."""
        if name:
            region = self._regions.get(name)
            if region is None:
                raise not_found(f"Unable to find system shared memory region: '{name}'")
            if isinstance(region, CudaShmRegion):
                raise not_found(f"The region named '{name}' is registered as CUDA shared memory, not system shared memory")
            return [region.status()]
        return [r.status() for r in self._by_name() if isinstance(r, SystemShmRegion)]

    def cuda_status(self, name: str = "") -> list[dict[str, Any]]:
        if name:
            region = self._regions.get(name)
            if region is None:
                raise not_found(f"Unable to find cuda shared memory region: '{name}'")
            if isinstance(region, SystemShmRegion):
                raise not_found(f"The region named '{name}' is registered as system shared memory, not CUDA shared memory")
            return [region.status()]
        return [r.status() for r in self._by_name() if isinstance(r, CudaShmRegion)]

    def _by_name(self) -> list[Region]:
        """The registered regions in the order of their names, as Triton lists them."""
        return [self._regions[name] for name in sorted(self._regions)]

    # ---- unregistration ----------------------------------------------------------------------
    def unregister(self, kind: type, name: str = "") -> None:
        """Unregister one region of `kind` (unknown names succeed silently) or all of them (empty name).

        A region in use is only marked: it goes when the last request using it ends (`release`)."""
        self._check_allowed()
        if name:
            found = self._regions.get(name)
            targets: list[Region] = [found] if found is not None and isinstance(found, kind) else []
        else:
            targets = [r for r in self._regions.values() if isinstance(r, kind)]
        for region in targets:
            region.removing = True
            if region.in_use == 0:
                self._remove(region)

    def _remove(self, region: Region) -> None:
        if self._regions.get(region.name) is region:
            del self._regions[region.name]
        if isinstance(region, CudaShmRegion) and region.keep is not None:  # an in-process request's own
            region.keep = None
            key = (region.raw_handle, region.device_id)
            entry = self._owned[key]
            entry[1] -= 1
            if entry[1]:
                return  # others share its mapping in the workers
            del self._owned[key]
        for callback in self.on_removed:
            callback(region)
        if isinstance(region, SystemShmRegion) and region.on_gone is not None:
            on_gone, region.on_gone = region.on_gone, None
            on_gone()

    # ---- per-request use ---------------------------------------------------------------------
    def lookup(self, name: str, offset: int, byte_size: int, owned: Region | None = None) -> Region:
        """The region for a tensor reference, with Triton's bounds checks (offset relative to the region); `owned`:
        the in-process request's own region (`own_cuda`), checked the same way.

        A region awaiting removal may still be used, as in Triton; the request then delays its removal."""
        region = owned if owned is not None else self._regions.get(name)
        if region is None:
            raise not_found(f"Unable to find shared memory region: '{name}'")
        if offset < 0 or offset >= region.byte_size and not (offset == 0 and region.byte_size == 0):
            raise invalid_arg(f"Invalid offset for shared memory region: '{name}'")
        if byte_size < 0:
            raise invalid_arg(f"Invalid offset + byte size for shared memory region: '{name}'")
        if byte_size + offset > INT64_MAX:
            raise invalid_arg(
                f"Integer overflow detected: byte_size ({byte_size}) + offset ({offset}) exceeds maximum value "
                f"({INT64_MAX}) for region '{name}'"
            )
        if offset + byte_size > region.byte_size:
            raise invalid_arg(f"Invalid offset + byte size for shared memory region: '{name}'")
        return region

    def acquire(self, regions: list[Region]) -> None:
        for region in regions:
            region.in_use += 1

    def release(self, regions: list[Region]) -> None:
        for region in regions:
            region.in_use -= 1
            if region.in_use == 0 and region.removing:
                self._remove(region)

    def __len__(self) -> int:
        return len(self._regions)
