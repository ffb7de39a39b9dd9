"""A gRPC connection's receive segments (`_h2_segments.py`): a new segment only for a size that arrived in full
before and only while no other is being filled (a client that declares sizes and sends little gets none), reuse once
idle, the count and byte bounds, and release when the connection lets go."""

from __future__ import annotations

from pytriton.core.received import RECEIVE_MIN, ReceivedBuffers
from pytriton.core.shm_registry import SharedMemoryRegistry
from pytriton.frontend.h2.segments import ConnectionSegments
from tests.core.fakes import FakeSource

SIZE = RECEIVE_MIN


def _segments(count: int = 4, max_bytes: int = 64 << 20) -> tuple[ConnectionSegments, FakeSource]:
    buffers = ReceivedBuffers(SharedMemoryRegistry())
    source = FakeSource()
    buffers.attach(source)
    return ConnectionSegments(buffers, count, max_bytes), source


def test_a_new_segment_only_after_a_whole_message_of_its_size_and_one_at_a_time():
    segments, source = _segments()
    assert segments.take(SIZE) is None  # nothing of this size has arrived yet
    segments.arrived(bytearray(SIZE))  # (in ordinary memory)
    first = segments.take(SIZE)
    assert first is not None and len(source.made) == 1
    # a client that now declares messages of this size and sends nothing gets no more segments
    assert all(segments.take(SIZE) is None for _ in range(10))
    assert len(source.made) == 1
    segments.arrived(first)  # arrived in full; its request still holds it
    second = segments.take(SIZE)
    assert second is not None and len(source.made) == 2
    del first
    segments.arrived(second)
    del second
    third = segments.take(SIZE)  # the first is idle again: reused
    assert third is not None and len(source.made) == 2


def test_a_message_left_half_way_frees_its_segment_for_the_next():
    segments, source = _segments()
    segments.arrived(bytearray(SIZE))
    body = segments.take(SIZE)
    assert body is not None
    del body  # the stream was reset: it lets go of its buffer
    assert segments.take(SIZE) is not None and len(source.made) == 1


def test_bounds_and_release():
    buffers = ReceivedBuffers(SharedMemoryRegistry())
    source = FakeSource()
    buffers.attach(source)
    segments = ConnectionSegments(buffers, 2, 64 << 20)
    jobs = []
    for size in (SIZE, SIZE + 1, SIZE + 2):
        segments.arrived(bytearray(size))
        body = segments.take(size)
        assert body is not None
        segments.arrived(body)
        region = segments.segments[-1].region
        buffers.registry.acquire([region])  # a request in flight refers to it
        jobs.append(region)
        del body
    assert len(segments.segments) == 2 and source.freed == []  # the oldest was let go of, but its request goes on
    buffers.registry.release([jobs[0]])
    assert source.freed == [1]  # unlinked with the end of its request
    segments.drop()
    assert source.freed == [1]
    buffers.registry.release(jobs[1:])
    assert sorted(source.freed) == [1, 2, 3]


def test_the_byte_bound_counts_message_bytes_so_four_messages_fill_it_exactly():
    """A connection bounded to 4 segments and 4 messages' bytes keeps all four (the alignment room of each segment is
    not counted against the bound); a fifth message of the size evicts the oldest."""
    segments, source = _segments(count=4, max_bytes=4 * SIZE)
    segments.arrived(bytearray(SIZE))
    held = []
    for _ in range(4):
        body = segments.take(SIZE)
        assert body is not None
        segments.arrived(body)
        held.append(body)  # each request still holds its message
    assert len(source.made) == 4 and len(segments.segments) == 4
    body = segments.take(SIZE)
    assert body is not None and len(source.made) == 5 and len(segments.segments) == 4
