"""POSIX shared-memory arenas: the segments tensors travel in between the server and its workers.

An arena is owned by one process, which allocates and writes; the peer maps the same segments read-only
(`SegmentMap`) and is told (segment id, offset, size). Segment names are derived from a per-server tag,
the owner's pid and a segment id, so `sweep_dead_segments` can remove what a dead owner left behind.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
from typing import Iterator

import posix_ipc

logger = logging.getLogger("pytriton.proxy")

SHM_DIR = "/dev/shm"
NAME_ROOT = "pytriton"
ALIGNMENT = 64
MIN_SLOT = 256
DEFAULT_SEGMENT_SIZE = 64 * 1024 * 1024
DEFAULT_ARENA_LIMIT = 8 * 1024 * 1024 * 1024
# Allocations larger than a quarter segment get a segment of their own; their ids start here and are
# never reused, so a peer can tell them apart and drop its mapping when done.
DEDICATED_BASE = 1 << 20

_OFFSET_BITS = 40
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1


def slot_key(segment_id: int, offset: int) -> int:
    """One integer naming a slot (segment id and offset): what free lists and FREE messages carry."""
    return (segment_id << _OFFSET_BITS) | offset


def split_key(key: int) -> tuple[int, int]:
    """(segment id, offset) of a slot key."""
    return key >> _OFFSET_BITS, key & _OFFSET_MASK


def is_dedicated(segment_id: int) -> bool:
    """Whether a segment holds one large allocation (its peer drops the mapping once done with it)."""
    return segment_id >= DEDICATED_BASE


_NAME_RE = re.compile(rf"^{NAME_ROOT}_([0-9a-f]+)_(\d+)_([a-z]+)(\d+)$")


class ArenaExhaustedError(MemoryError):
    """The arena reached its size limit."""


def segment_name(tag: str, owner_pid: int, kind: str, segment_id: int) -> str:
    """The POSIX name (with leading slash) of one segment."""
    return f"/{NAME_ROOT}_{tag}_{owner_pid}_{kind}{segment_id}"


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists (one we may not signal counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def our_segments(tag: str | None = None, owner_pid: int | None = None) -> Iterator[tuple[str, int]]:
    """Yield (name, owner pid) of our segments in /dev/shm, filtered by server tag and owner pid."""
    try:
        entries = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return
    for entry in entries:
        match = _NAME_RE.match(entry)
        if not match:
            continue
        if tag is not None and match.group(1) != tag:
            continue
        pid = int(match.group(2))
        if owner_pid is not None and pid != owner_pid:
            continue
        yield "/" + entry, pid


def unlink_segments(tag: str | None = None, owner_pid: int | None = None) -> int:
    """Unlink our segments matching the filters; return how many were removed."""
    removed = 0
    for name, _ in list(our_segments(tag, owner_pid)):
        try:
            posix_ipc.unlink_shared_memory(name)
            removed += 1
        except posix_ipc.ExistentialError:
            pass
    return removed


def sweep_dead_segments() -> int:
    """Unlink segments whose owner process no longer exists (left by a crash)."""
    removed = 0
    for name, pid in list(our_segments()):
        if not pid_alive(pid):
            try:
                posix_ipc.unlink_shared_memory(name)
                removed += 1
            except posix_ipc.ExistentialError:
                pass
    if removed:
        logger.info("removed %d shared-memory segment(s) left by dead processes", removed)
    return removed


def _size_class(nbytes: int) -> int:
    if nbytes <= MIN_SLOT:
        return MIN_SLOT
    return 1 << (nbytes - 1).bit_length()


class _Segment:
    __slots__ = ("name", "size", "mmap", "view", "used")

    def __init__(self, name: str, size: int):
        shm = posix_ipc.SharedMemory(name, posix_ipc.O_CREX, mode=0o600, size=size)
        try:
            self.mmap = mmap.mmap(shm.fd, size)
        finally:
            shm.close_fd()
        self.name = name
        self.size = size
        self.view = memoryview(self.mmap)
        self.used = 0

    def close(self) -> None:
        self.view.release()
        try:
            self.mmap.close()
        except BufferError:
            pass  # views still exported; the mapping goes when they do
        try:
            posix_ipc.unlink_shared_memory(self.name)
        except posix_ipc.ExistentialError:
            pass


class ShmArena:
    """Segments owned by this process, carved into power-of-two slots with LIFO free lists.

    The most recently freed slot of a size class is reused first: it is the one most likely in cache.
    """

    def __init__(
        self,
        tag: str,
        kind: str,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        limit: int = DEFAULT_ARENA_LIMIT,
        owner_pid: int | None = None,
    ):
        self.tag = tag
        self.kind = kind
        self.owner_pid = owner_pid if owner_pid is not None else os.getpid()
        self.segment_size = segment_size
        self.limit = limit
        self._segments: dict[int, _Segment] = {}
        self._current: _Segment | None = None
        self._current_id = -1
        self._next_id = 0
        self._next_dedicated = DEDICATED_BASE
        self._free: dict[int, list[int]] = {}
        self._slots: dict[int, int] = {}  # key -> size class (0 for dedicated)
        self._total = 0

    key = staticmethod(slot_key)

    @property
    def total_bytes(self) -> int:
        """Bytes of shared memory currently created by this arena."""
        return self._total

    @property
    def allocated_slots(self) -> int:
        return len(self._slots)

    def _new_segment(self, segment_id: int, size: int) -> _Segment:
        if self._total + size > self.limit:
            raise ArenaExhaustedError(
                f"shared-memory arena '{self.kind}' is full ({self._total} of {self.limit} bytes in use)"
            )
        segment = _Segment(segment_name(self.tag, self.owner_pid, self.kind, segment_id), size)
        self._segments[segment_id] = segment
        self._total += size
        return segment

    def allocate(self, nbytes: int) -> tuple[int, int, memoryview]:
        """Reserve `nbytes`; return (segment id, offset, writable view of exactly nbytes)."""
        if nbytes > self.segment_size // 4:
            segment_id = self._next_dedicated
            self._next_dedicated += 1
            size = max(mmap.PAGESIZE, -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE)
            segment = self._new_segment(segment_id, size)
            self._slots[self.key(segment_id, 0)] = 0
            return segment_id, 0, segment.view[:nbytes]
        size_class = _size_class(nbytes)
        free = self._free.get(size_class)
        if free:
            key = free.pop()
            self._slots[key] = size_class
            segment_id, offset = split_key(key)
            return segment_id, offset, self._segments[segment_id].view[offset : offset + nbytes]
        current = self._current
        if current is None or current.used + size_class > current.size:
            self._current_id = self._next_id
            self._next_id += 1
            current = self._current = self._new_segment(self._current_id, self.segment_size)
        segment = current
        offset = segment.used
        segment.used += size_class
        key = self.key(self._current_id, offset)
        self._slots[key] = size_class
        return self._current_id, offset, segment.view[offset : offset + nbytes]

    def free(self, segment_id: int, offset: int) -> None:
        """Return a slot; freeing an unknown slot is an error in the caller and is logged."""
        key = self.key(segment_id, offset)
        size_class = self._slots.pop(key, None)
        if size_class is None:
            logger.error("arena '%s': free of unknown slot (segment %d, offset %d)", self.kind, segment_id, offset)
            return
        if size_class == 0:
            segment = self._segments.pop(segment_id)
            self._total -= segment.size
            segment.close()
            return
        self._free.setdefault(size_class, []).append(key)

    def free_key(self, key: int) -> None:
        self.free(*split_key(key))

    def close(self) -> None:
        """Unmap and unlink every segment."""
        for segment in self._segments.values():
            segment.close()
        self._segments.clear()
        self._slots.clear()
        self._free.clear()
        self._current = None
        self._total = 0

    def __enter__(self) -> ShmArena:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SegmentMap:
    """Read-only mappings of a peer's arena segments, opened on first use and cached."""

    def __init__(self, tag: str, owner_pid: int, kind: str):
        self.tag = tag
        self.owner_pid = owner_pid
        self.kind = kind
        self._maps: dict[int, memoryview] = {}

    def _open(self, segment_id: int) -> memoryview:
        name = segment_name(self.tag, self.owner_pid, self.kind, segment_id)
        try:
            shm = posix_ipc.SharedMemory(name, 0, read_only=True)
        except posix_ipc.ExistentialError as exc:
            raise FileNotFoundError(f"shared-memory segment '{name}' does not exist") from exc
        try:
            mapping = mmap.mmap(shm.fd, shm.size, prot=mmap.PROT_READ)
        finally:
            shm.close_fd()
        view = memoryview(mapping)
        self._maps[segment_id] = view
        return view

    def view(self, segment_id: int, offset: int, nbytes: int) -> memoryview:
        """A read-only view of `nbytes` at `offset` in the peer's segment."""
        view = self._maps.get(segment_id)
        if view is None:
            view = self._open(segment_id)
        if offset + nbytes > len(view):
            raise ValueError(f"slot (segment {segment_id}, offset {offset}, {nbytes} bytes) is outside the segment")
        return view[offset : offset + nbytes]

    def release_dedicated(self, segment_id: int) -> None:
        """Drop the mapping of a dedicated (single-tensor) segment; it is unmapped once no view holds it."""
        if is_dedicated(segment_id):
            self._maps.pop(segment_id, None)

    def close(self) -> None:
        self._maps.clear()
