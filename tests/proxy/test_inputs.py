"""A worker's input segments: another worker's response arena read in place (an ensemble step's output handed on),
its dedicated segments dropped after the execution, a producer that vanished answered with a RegionError."""

from __future__ import annotations

import os
import secrets

import numpy as np
import pytest

from pytriton.proxy.arena import DEDICATED_BASE, ShmArena, unlink_segments
from pytriton.proxy.inputs import InputSegments
from pytriton.proxy.messages import TensorRef
from pytriton.proxy.regions import RegionError


@pytest.fixture
def tag():
    tag = secrets.token_hex(4)
    yield tag
    unlink_segments(tag)


def peer_ref(segment: int, offset: int, nbytes: int, kind: str = "rsp") -> TensorRef:
    return TensorRef(name="T", nbytes=nbytes, segment=segment, offset=offset, peer_pid=os.getpid(), peer_arena=kind)


def test_a_peer_arena_slot_is_read_where_it_lies(tag):
    with ShmArena(tag, "rsp", segment_size=1 << 20) as producer:
        segment, offset, view = producer.allocate(4096)
        np.frombuffer(view, np.uint8)[:] = 7
        inputs = InputSegments(tag, os.getpid())
        try:
            seen = inputs.view(peer_ref(segment, offset, 4096))
            assert seen.readonly and bytes(seen[:3]) == b"\x07\x07\x07"
            np.frombuffer(view, np.uint8)[0] = 9  # the same memory, not a copy
            assert seen[0] == 9
        finally:
            del seen
            inputs.close()


def test_a_dedicated_peer_segment_is_dropped_after_the_execution(tag):
    with ShmArena(tag, "rsp", segment_size=1 << 20) as producer:
        segment, offset, _ = producer.allocate(1 << 20)  # larger than a quarter segment: its own segment
        assert segment >= DEDICATED_BASE
        inputs = InputSegments(tag, os.getpid())
        inputs.view(peer_ref(segment, offset, 1 << 20)).release()
        peer = inputs._peers[(os.getpid(), "rsp")]
        assert segment in peer._maps
        inputs.release_dedicated()
        assert segment not in peer._maps
        inputs.close()


def test_a_vanished_producer_is_a_region_error(tag):
    inputs = InputSegments(tag, os.getpid())
    with pytest.raises(RegionError, match=r"input 'T' is gone from the shared memory of the model instance"):
        inputs.view(peer_ref(3, 0, 16, kind="gone"))
    inputs.close()
