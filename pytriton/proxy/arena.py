"""POSIX shared-memory arenas: the segments tensors travel in between the server and its workers.

An arena is owned by one process, which allocates and writes; the peer maps the same segments read-only
(`SegmentMap`) and is told (segment id, offset, size). Segment names carry a per-server tag, the owner's pid and a
segment id. The owner locks each segment (`flock`) before it gets its name and holds the lock while it lives, so
`sweep_dead_segments` removes only what a dead owner left, even across pid namespaces. Pages are reserved
(`posix_fallocate`) before they are written: a full /dev/shm is an error for one request, not a SIGBUS.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import mmap
import os
import re
import stat
import time
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
# Pages of a shared segment are reserved in steps of this many bytes as slots are first carved from it.
RESERVE_STEP = 1024 * 1024
# A segment is made under its name plus this suffix, locked, then renamed: a segment under its real name is always
# locked while its owner lives. A staging name younger than SWEEP_GRACE_S is never swept (not locked yet, maybe).
STAGING_SUFFIX = ".new"
SWEEP_GRACE_S = 2.0

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


_NAME_RE = re.compile(rf"^{NAME_ROOT}_([0-9a-f]+)_(\d+)_([a-z]+)(\d+)({re.escape(STAGING_SUFFIX)})?$")


class ArenaExhaustedError(MemoryError):
    """The arena reached its size limit."""


class SharedMemoryFullError(ArenaExhaustedError):
    """/dev/shm has no room left for the pages an allocation needs."""


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1024 * 1024):.1f} MiB"


def shm_full_message(nbytes: int) -> str:
    """What a user reads when /dev/shm cannot hold `nbytes` more: its size, what was asked, how to raise it."""
    try:
        info = os.statvfs(SHM_DIR)
        room = f"{_mib(info.f_bavail * info.f_frsize)} free of {_mib(info.f_blocks * info.f_frsize)}"
    except OSError:
        room = "size unknown"
    return (
        f"shared memory {SHM_DIR} is full: {_mib(nbytes)} ({nbytes} bytes) needed, {room}; give {SHM_DIR} more "
        "room (docker run --shm-size=1g, or in Kubernetes an emptyDir with medium: Memory mounted on /dev/shm)"
    )


_FULL_WARNING_INTERVAL_S = 60.0
_last_full_warning = -_FULL_WARNING_INTERVAL_S


def reserve_pages(fd: int, offset: int, length: int) -> None:
    """Make tmpfs commit the pages of [offset, offset + length) now, so that writing them cannot raise SIGBUS.

    Raises SharedMemoryFullError when /dev/shm has no room (ENOSPC; also logged, at most once a minute),
    ArenaExhaustedError on another failure.
    """
    global _last_full_warning
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            message = shm_full_message(length)
            now = time.monotonic()
            if now - _last_full_warning >= _FULL_WARNING_INTERVAL_S:
                _last_full_warning = now
                logger.warning("%s (further ones are not logged for a minute)", message)
            raise SharedMemoryFullError(message) from None
        raise ArenaExhaustedError(f"cannot reserve {length} bytes of shared memory in {SHM_DIR}: {exc}") from None


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


def _remove_if_dead(name: str, pid: int, uid: int) -> bool:
    """Unlink one segment if no process holds its lock; True if it was removed.

    Also kept: segments of other users, files that are not regular files (a symlink, say), a segment whose pid
    is alive in our pid namespace (one made without a lock, or a reused pid: it waits for a later sweep), and a
    staging name younger than SWEEP_GRACE_S (its maker may be between creating and locking it).
    """
    path = SHM_DIR + name
    info = os.lstat(path)
    if info.st_uid != uid or not stat.S_ISREG(info.st_mode):
        return False
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its owner is alive, in this pid namespace or another sharing /dev/shm
        if pid_alive(pid):
            return False
        if name.endswith(STAGING_SUFFIX) and time.time() - os.fstat(fd).st_ctime < SWEEP_GRACE_S:
            return False
        os.unlink(path)  # while we hold the lock
        return True
    finally:
        os.close(fd)


def sweep_dead_segments() -> int:
    """Unlink segments that no live process holds (left by a crash); return how many. Never raises.

    The pid in a segment's name is not trusted: a server in another pid namespace sharing /dev/shm (containers
    of one pod) has pids that mean nothing here. Its lock, which the kernel drops when the owner dies, is.
    """
    removed = 0
    uid = os.getuid()
    try:
        segments = list(our_segments())
    except OSError as exc:
        logger.debug("cannot list %s for the sweep: %s", SHM_DIR, exc)
        return 0
    for name, pid in segments:
        try:
            removed += _remove_if_dead(name, pid, uid)
        except OSError as exc:  # gone meanwhile, or not ours to open
            logger.debug("sweep: leaving shared-memory segment '%s': %s", name, exc)
    if removed:
        logger.info("removed %d shared-memory segment(s) left by dead processes", removed)
    return removed


def _size_class(nbytes: int) -> int:
    if nbytes <= MIN_SLOT:
        return MIN_SLOT
    return 1 << (nbytes - 1).bit_length()


class _Segment:
    """One segment this process owns: created, locked for its lifetime, mapped; pages reserved as slots need them."""

    __slots__ = ("name", "size", "mmap", "view", "used", "reserved", "fd")

    def __init__(self, name: str, size: int, reserve: bool = False):
        """`reserve`: commit all its pages now (a dedicated segment, written whole at once)."""
        created = name + STAGING_SUFFIX
        shm = posix_ipc.SharedMemory(created, posix_ipc.O_CREX, mode=0o600, size=size)
        self.fd = shm.fd
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held until close: the sweep's sign of life
            os.rename(SHM_DIR + created, SHM_DIR + name)
            created = name
            if reserve:
                reserve_pages(self.fd, 0, size)
            self.mmap = mmap.mmap(self.fd, size)
        except BaseException:
            self._unlink(created)
            os.close(self.fd)
            raise
        self.name = name
        self.size = size
        self.view = memoryview(self.mmap)
        self.used = 0
        self.reserved = size if reserve else 0

    def reserve_to(self, end: int) -> None:
        """Commit the pages up to `end` (at least), a RESERVE_STEP at a time, before a slot there is written."""
        target = min(self.size, -(-end // RESERVE_STEP) * RESERVE_STEP)
        reserve_pages(self.fd, self.reserved, target - self.reserved)
        self.reserved = target

    def release(self, start: int, end: int) -> int:
        """Give the whole pages of [start, end) back to /dev/shm (their content is lost); return the bytes."""
        start = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
        end = end // mmap.PAGESIZE * mmap.PAGESIZE
        if end <= start:
            return 0
        self.mmap.madvise(mmap.MADV_REMOVE, start, end - start)
        return end - start

    @staticmethod
    def _unlink(name: str) -> None:
        try:
            posix_ipc.unlink_shared_memory(name)
        except posix_ipc.ExistentialError:
            pass

    def close(self) -> None:
        self.view.release()
        try:
            self.mmap.close()
        except BufferError:
            pass  # views still exported; the mapping goes when they do
        self._unlink(self.name)  # before the lock goes: a sweep never sees it unlocked while we live
        os.close(self.fd)


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
        self._free_released: dict[int, list[int]] = {}  # free slots whose pages went back to /dev/shm
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

    def _new_segment(self, segment_id: int, size: int, reserve: bool = False) -> _Segment:
        if self._total + size > self.limit:
            raise ArenaExhaustedError(
                f"shared-memory arena '{self.kind}' is full ({self._total} of {self.limit} bytes in use)"
            )
        segment = _Segment(segment_name(self.tag, self.owner_pid, self.kind, segment_id), size, reserve)
        self._segments[segment_id] = segment
        self._total += size
        return segment

    def allocate(self, nbytes: int) -> tuple[int, int, memoryview]:
        """Reserve `nbytes`; return (segment id, offset, writable view of exactly nbytes)."""
        if nbytes > self.segment_size // 4:
            segment_id = self._next_dedicated
            self._next_dedicated += 1
            size = max(mmap.PAGESIZE, -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE)
            try:
                segment = self._new_segment(segment_id, size, reserve=True)
            except SharedMemoryFullError:
                if not self.release_free_pages():
                    raise
                segment = self._new_segment(segment_id, size, reserve=True)
            self._slots[self.key(segment_id, 0)] = 0
            return segment_id, 0, segment.view[:nbytes]
        size_class = _size_class(nbytes)
        free = self._free.get(size_class)
        if free:
            key = free.pop()
            self._slots[key] = size_class
            segment_id, offset = split_key(key)
            return segment_id, offset, self._segments[segment_id].view[offset : offset + nbytes]
        if self._free_released.get(size_class):
            return self._reuse_released(size_class, nbytes)
        current = self._current
        if current is None or current.used + size_class > current.size:
            self._current_id = self._next_id
            self._next_id += 1
            current = self._current = self._new_segment(self._current_id, self.segment_size)
        segment = current
        offset = segment.used
        if offset + size_class > segment.reserved:
            try:
                segment.reserve_to(offset + size_class)
            except SharedMemoryFullError:
                if not self.release_free_pages():
                    raise
                segment.reserve_to(offset + size_class)
        segment.used += size_class
        key = self.key(self._current_id, offset)
        self._slots[key] = size_class
        return self._current_id, offset, segment.view[offset : offset + nbytes]

    def _reuse_released(self, size_class: int, nbytes: int) -> tuple[int, int, memoryview]:
        key = self._free_released[size_class][-1]
        segment_id, offset = split_key(key)
        segment = self._segments[segment_id]
        try:
            reserve_pages(segment.fd, offset, size_class)
        except SharedMemoryFullError:
            if not self.release_free_pages():
                raise
            reserve_pages(segment.fd, offset, size_class)
        self._free_released[size_class].pop()
        self._slots[key] = size_class
        return segment_id, offset, segment.view[offset : offset + nbytes]

    def release_free_pages(self) -> int:
        """Give the pages of free slots (and of reserved, never used segment tails) back to /dev/shm, for when it is
        full; return the bytes given back. A released slot is reserved again when it is reused."""
        released = 0
        for size_class in [size for size in self._free if size >= mmap.PAGESIZE]:
            keys = self._free.pop(size_class)
            for key in keys:
                segment_id, offset = split_key(key)
                released += self._segments[segment_id].release(offset, offset + size_class)
            self._free_released.setdefault(size_class, []).extend(keys)
        for segment_id, segment in self._segments.items():
            if not is_dedicated(segment_id) and segment.reserved > segment.used:
                released += segment.release(segment.used, segment.reserved)
                segment.reserved = segment.used
        if released:
            logger.debug("arena '%s': gave %d bytes of free slots back to %s", self.kind, released, SHM_DIR)
        return released

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
        self._free_released.clear()
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
