"""Shared-memory arenas: allocation, LIFO reuse, dedicated segments, cleanup of dead owners."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import numpy as np
import pytest

from pytriton.proxy.arena import (
    DEDICATED_BASE,
    ArenaExhaustedError,
    SegmentMap,
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


def test_sweep_removes_segments_of_dead_owners_only(tag):
    # A child process creates a segment and dies without cleaning up (SIGKILL-like exit).
    code = (
        "import os, posix_ipc, sys; from pytriton.proxy.arena import segment_name;"
        f"s = posix_ipc.SharedMemory(segment_name('{tag}', os.getpid(), 'rsp', 0), posix_ipc.O_CREX, size=4096);"
        "print(os.getpid()); sys.stdout.flush(); os._exit(0)"
    )
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    dead_pid = int(child.stdout.strip())
    with ShmArena(tag, "req", segment_size=64 * 1024) as arena:
        arena.allocate(10)
        owners = {pid for _, pid in our_segments(tag)}
        assert owners == {dead_pid, os.getpid()}
        assert sweep_dead_segments() >= 1
        assert {pid for _, pid in our_segments(tag)} == {os.getpid()}
