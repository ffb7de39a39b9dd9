"""Shared-memory arenas: allocation, LIFO reuse, dedicated segments, page reservation (a full /dev/shm is an
error, not a SIGBUS), cleanup of dead owners only (by lock, across pid namespaces)."""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pytriton.proxy.arena import (
    DEDICATED_BASE,
    RESERVE_STEP,
    STAGING_SUFFIX,
    ArenaExhaustedError,
    SegmentMap,
    SharedMemoryFullError,
    ShmArena,
    our_segments,
    segment_name,
    sweep_dead_segments,
    unlink_segments,
)


@pytest.fixture
def tag():
    tag = secrets.token_hex(4)
    yield tag
    unlink_segments(tag)


def test_allocate_write_and_read_through_peer_mapping(tag):
    with ShmArena(tag, "req", segment_size=1 << 20) as arena:
        segment, offset, view = arena.allocate(100)
        view[:] = bytes(range(100))
        peer = SegmentMap(tag, os.getpid(), "req")
        assert bytes(peer.view(segment, offset, 100)) == bytes(range(100))
        with pytest.raises(TypeError):
            peer.view(segment, offset, 100)[0] = 1  # the peer maps read-only
        peer.close()


def test_slots_are_aligned_and_do_not_overlap(tag):
    with ShmArena(tag, "req", segment_size=1 << 20) as arena:
        slots = [arena.allocate(n) for n in (1, 100, 300, 4096, 5000, 70)]
        ranges = sorted((s, o, o + len(v)) for s, o, v in slots)
        for (s1, _, end1), (s2, start2, _) in zip(ranges, ranges[1:]):
            assert s1 != s2 or end1 <= start2
        assert all(o % 64 == 0 for _, o, _ in slots)


def test_most_recently_freed_slot_is_reused_first(tag):
    with ShmArena(tag, "req", segment_size=1 << 20) as arena:
        a = arena.allocate(1000)[:2]
        b = arena.allocate(1000)[:2]
        arena.free(*a)
        arena.free(*b)
        assert arena.allocate(900)[:2] == b
        assert arena.allocate(1000)[:2] == a
        assert arena.allocated_slots == 2


def test_new_segment_when_full_and_limit(tag):
    with ShmArena(tag, "req", segment_size=64 * 1024, limit=128 * 1024) as arena:
        first = [arena.allocate(8192)[0] for _ in range(8)]
        assert set(first) == {0}
        assert arena.allocate(8192)[0] == 1
        assert arena.total_bytes == 128 * 1024
        for _ in range(7):
            arena.allocate(8192)
        with pytest.raises(ArenaExhaustedError, match="full"):
            arena.allocate(8192)


def test_large_allocation_gets_dedicated_segment_unlinked_on_free(tag):
    with ShmArena(tag, "rsp", segment_size=1 << 20) as arena:
        segment, offset, view = arena.allocate(3 << 20)
        assert segment >= DEDICATED_BASE and offset == 0 and len(view) == 3 << 20
        name = segment_name(tag, os.getpid(), "rsp", segment)
        assert os.path.exists("/dev/shm" + name)
        del view
        arena.free(segment, offset)
        assert not os.path.exists("/dev/shm" + name)


def test_close_unlinks_every_segment(tag):
    arena = ShmArena(tag, "req", segment_size=64 * 1024)
    arena.allocate(10)
    arena.allocate(40_000)
    assert len(list(our_segments(tag))) == 2
    arena.close()
    assert list(our_segments(tag)) == []


def test_free_of_unknown_slot_is_harmless(tag, caplog):
    with ShmArena(tag, "req", segment_size=64 * 1024) as arena:
        arena.free(3, 128)
        assert "unknown slot" in caplog.text


def test_numpy_view_on_slot_without_copy(tag):
    with ShmArena(tag, "req", segment_size=1 << 20) as arena:
        segment, offset, view = arena.allocate(64)
        np.frombuffer(view, dtype=np.float32)[:] = np.arange(16)
        peer = SegmentMap(tag, os.getpid(), "req")
        array = np.frombuffer(peer.view(segment, offset, 64), dtype=np.float32)
        np.testing.assert_array_equal(array, np.arange(16, dtype=np.float32))
        assert not array.flags.writeable
        del array
        peer.close()


def _blocks(tag: str, kind: str, segment_id: int) -> int:
    """Bytes of /dev/shm that a segment's pages take."""
    return os.stat("/dev/shm" + segment_name(tag, os.getpid(), kind, segment_id)).st_blocks * 512


def test_pages_are_reserved_in_steps_as_slots_are_carved(tag):
    with ShmArena(tag, "req", segment_size=8 * RESERVE_STEP) as arena:
        segment, _, _ = arena.allocate(100)
        assert _blocks(tag, "req", segment) == RESERVE_STEP  # not the whole (sparse) segment
        for _ in range(3):
            arena.allocate(RESERVE_STEP // 2)
        assert _blocks(tag, "req", segment) == 2 * RESERVE_STEP
        dedicated, _, _ = arena.allocate(3 * RESERVE_STEP)
        assert _blocks(tag, "req", dedicated) == 3 * RESERVE_STEP  # all of it, before it is written


def _fail_fallocate(monkeypatch, code: int) -> list[int]:
    asked: list[int] = []

    def fallocate(fd: int, offset: int, length: int) -> None:
        asked.append(length)
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "posix_fallocate", fallocate)
    return asked


def test_full_shm_is_an_error_naming_dev_shm_and_the_arena_stays_usable(tag, monkeypatch):
    with ShmArena(tag, "rsp", segment_size=8 << 20) as arena:
        kept = arena.allocate(1000)[:2]  # reserves the first MiB of segment 0
        with monkeypatch.context() as patch:
            asked = _fail_fallocate(patch, errno.ENOSPC)
            with pytest.raises(SharedMemoryFullError) as dedicated:
                arena.allocate(5 << 20)
            with pytest.raises(SharedMemoryFullError):
                arena.allocate(1 << 20)  # a slot of segment 0 past its reserved first MiB
        message = str(dedicated.value)
        assert message.startswith("shared memory /dev/shm is full: 5.0 MiB (5242880 bytes) needed, ")
        assert " free of " in message and "--shm-size" in message
        assert asked[0] == 5 << 20
        assert isinstance(dedicated.value, ArenaExhaustedError)  # what the router and the workers already handle
        # Nothing half-made is left: no dedicated segment, no slot; what was allocated before is intact.
        assert [pid for _, pid in our_segments(tag)] == [os.getpid()]
        assert arena.allocated_slots == 1 and arena.total_bytes == 8 << 20
        assert arena.allocate(1 << 20)[:2] == (0, 1024)  # the failed slot was not carved
        assert arena.allocate(5 << 20)[0] >= DEDICATED_BASE
        arena.free(*kept)
        assert arena.allocate(1000)[:2] == kept


def test_when_shm_is_full_free_slots_give_their_pages_back_and_are_reserved_again_on_reuse(tag, monkeypatch):
    with ShmArena(tag, "req", segment_size=8 << 20) as arena:
        slot = arena.allocate(2 << 20)
        slot[2][:] = b"x" * (2 << 20)
        arena.free(*slot[:2])
        assert _blocks(tag, "req", 0) == 2 << 20  # a freed slot keeps its pages for reuse
        real = os.posix_fallocate
        calls: list[int] = []

        def full_once(fd: int, offset: int, length: int) -> None:
            calls.append(length)
            if len(calls) == 1:
                raise OSError(errno.ENOSPC, "No space left on device")
            real(fd, offset, length)

        monkeypatch.setattr(os, "posix_fallocate", full_once)
        segment, _, view = arena.allocate(5 << 20)  # full at first: the free slot's pages go back, then it fits
        assert segment >= DEDICATED_BASE and len(calls) == 2
        assert _blocks(tag, "req", 0) == 0
        again = arena.allocate(2 << 20)  # the released slot, its pages reserved again
        assert again[:2] == slot[:2] and _blocks(tag, "req", 0) == 2 << 20 and len(calls) == 3
        assert bytes(again[2][:4]) == b"\0\0\0\0"


def test_other_fallocate_failures_are_arena_errors(tag, monkeypatch):
    with ShmArena(tag, "req", segment_size=1 << 20) as arena:
        _fail_fallocate(monkeypatch, errno.EIO)
        with pytest.raises(ArenaExhaustedError, match="cannot reserve 3145728 bytes of shared memory in /dev/shm"):
            arena.allocate(3 << 20)


def _run_in_small_tmpfs(code: str, size: str = "8m") -> subprocess.CompletedProcess:
    script = f'mount -t tmpfs -o size={size} tmpfs /dev/shm && exec "$0" -c "$1"'
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, sys.executable,
                           textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_real_small_tmpfs_gives_enospc_error_not_sigbus():
    probe = _run_in_small_tmpfs("pass")
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here: {probe.stderr.strip()}")
    result = _run_in_small_tmpfs(
        """
        from pytriton.proxy.arena import ShmArena, SharedMemoryFullError
        arena = ShmArena("abcd", "rsp")
        for nbytes in (4 << 20, 1 << 20, 6 << 20):  # the 64 MiB segment is sparse: 8 MiB hold the first two
            try:
                segment, offset, view = arena.allocate(nbytes)
                view[:] = b"x" * nbytes  # without the reservation the third write would raise SIGBUS
                print("ok", nbytes)
            except SharedMemoryFullError as exc:
                print("full", exc)
        arena.close()
        # 3 MiB of free slots, then 6 MiB for a segment of its own: the free slots give their pages back.
        arena = ShmArena("abce", "rsp", segment_size=8 << 20)
        slots = [arena.allocate(nbytes) for nbytes in (2 << 20, 1 << 20)]
        for segment, offset, view in slots:
            view[:] = b"y" * len(view)
            arena.free(segment, offset)
        for nbytes in (6 << 20, 1 << 20):
            segment, offset, view = arena.allocate(nbytes)
            view[:] = b"z" * nbytes
            print("reused", nbytes)
        arena.close()
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [f"ok {4 << 20}", f"ok {1 << 20}"], result.stdout
    assert lines[3:] == ["reused 6291456", "reused 1048576"], result.stdout
    # 6 MiB take a slot of the 8 MiB size class: that is what /dev/shm is asked for
    assert lines[2].startswith("full shared memory /dev/shm is full: 8.0 MiB (8388608 bytes) needed, "), lines
    assert "of 8.0 MiB" in lines[2]


def _dead_owner_segment(tag: str) -> int:
    """Make a segment the way a worker does, then die without cleaning up; return the dead pid."""
    code = (
        "import os, sys; from pytriton.proxy.arena import ShmArena;"
        f"ShmArena('{tag}', 'rsp', segment_size=65536).allocate(10);"
        "print(os.getpid()); sys.stdout.flush(); os._exit(0)"
    )
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(child.stdout.strip())


def test_sweep_removes_segments_of_dead_owners_only(tag):
    dead_pid = _dead_owner_segment(tag)
    with ShmArena(tag, "req", segment_size=64 * 1024) as arena:
        arena.allocate(10)
        owners = {pid for _, pid in our_segments(tag)}
        assert owners == {dead_pid, os.getpid()}
        assert sweep_dead_segments() >= 1
        assert {pid for _, pid in our_segments(tag)} == {os.getpid()}


def test_sweep_keeps_locked_segments_whatever_pid_their_name_carries(tag):
    # A server in another pid namespace sharing /dev/shm: its pid means nothing here (no such process), but it
    # holds the lock of its segments, and the sweep must leave them alone.
    foreign_pid = _dead_owner_segment(secrets.token_hex(4))  # a pid that is surely gone
    unlink_segments(owner_pid=foreign_pid)
    with ShmArena(tag, "req", segment_size=64 * 1024, owner_pid=foreign_pid) as arena:
        segment, offset, view = arena.allocate(10)
        view[:] = b"0123456789"
        sweep_dead_segments()
        assert [pid for _, pid in our_segments(tag)] == [foreign_pid]
        peer = SegmentMap(tag, foreign_pid, "req")
        assert bytes(peer.view(segment, offset, 10)) == b"0123456789"
        peer.close()


def test_sweep_from_another_pid_namespace_keeps_a_live_owners_segments(tag):
    with ShmArena(tag, "req", segment_size=64 * 1024) as arena:
        arena.allocate(10)
        arena.allocate(5 * 64 * 1024)  # and a dedicated one
        code = "from pytriton.proxy import arena; print(arena.sweep_dead_segments())"
        result = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
                                capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        if result.returncode != 0:
            pytest.skip(f"cannot make a pid namespace here: {result.stderr.strip()}")
        assert len(list(our_segments(tag))) == 2, result.stdout


def test_segments_are_made_under_a_staging_name_and_locked_before_they_get_their_own(tag):
    with ShmArena(tag, "req", segment_size=64 * 1024) as arena:
        arena.allocate(10)
        [(name, _)] = our_segments(tag)
        assert name == segment_name(tag, os.getpid(), "req", 0)  # renamed once locked: no staging name stays
        fd = os.open("/dev/shm" + name, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)


def test_sweep_leaves_young_staging_segments_and_other_users_and_never_raises(tag, monkeypatch):
    import posix_ipc

    gone = _dead_owner_segment(secrets.token_hex(4))
    unlink_segments(owner_pid=gone)
    # Unlocked under its staging name, just made: its maker may be about to lock it. Kept until it is old.
    staging = segment_name(tag, gone, "req", 0) + STAGING_SUFFIX
    posix_ipc.SharedMemory(staging, posix_ipc.O_CREX, size=4096).close_fd()
    other = segment_name(tag, gone, "req", 1)
    posix_ipc.SharedMemory(other, posix_ipc.O_CREX, mode=0o600, size=4096).close_fd()
    try:
        os.chown("/dev/shm" + other, 4321, 4321)
    except PermissionError:
        pytest.skip("needs root to give a segment to another user")
    # Unlocked (made by an older version, say) but its pid is alive here: kept too.
    alive = segment_name(tag, os.getpid(), "rsp", 0)
    posix_ipc.SharedMemory(alive, posix_ipc.O_CREX, size=4096).close_fd()
    assert sweep_dead_segments() == 0
    assert len(list(our_segments(tag))) == 3
    monkeypatch.setattr("pytriton.proxy.arena.SWEEP_GRACE_S", 0.0)  # the staging one is old now
    assert sweep_dead_segments() == 1
    assert sorted(name for name, _ in our_segments(tag)) == sorted([other, alive])  # another user's: never
