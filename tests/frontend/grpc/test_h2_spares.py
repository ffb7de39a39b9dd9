"""Message buffers kept for the next messages of the same size: several per connection (calls in flight each hold
one), bounded in count and bytes."""

from __future__ import annotations

import types

from pytriton.frontend.h2.call import SPARE_MAX, SPARES, GrpcCalls
from pytriton.frontend.h2.stream import OPEN, Stream

SIZE = 1 << 20


def _calls() -> GrpcCalls:
    connection = types.SimpleNamespace(outbox=None, loop=None, peer="test")
    return GrpcCalls(connection, {}, max_message_bytes=1 << 30)  # type: ignore[arg-type]


def _message(fill: int, size: int = SIZE) -> bytes:
    return b"\x00" + size.to_bytes(4, "big") + bytes([fill]) * size


def _receive(calls: GrpcCalls, stream_id: int, fill: int, size: int = SIZE) -> tuple[Stream, bytearray]:
    """Feed one whole message in 64 KiB pieces; the stream then holds it (a call in flight)."""
    stream = Stream(stream_id, OPEN, 65535, 1 << 30)
    data = memoryview(_message(fill, size))
    buffer = None
    for start in range(0, len(data), 65536):
        calls.feed(stream, data[start : start + 65536])
        if buffer is None and stream.body is not None:
            buffer = stream.body
    assert len(stream.messages) == 1 and stream.messages[0] is buffer
    assert bytes(buffer) == bytes([fill]) * size
    return stream, buffer


def test_a_free_spare_is_found_while_another_call_holds_the_newest():
    calls = _calls()
    first_stream, first = _receive(calls, 1, 1)
    first_id = id(first)
    del first  # only the call (its stream) refers to it now
    second_stream, second = _receive(calls, 3, 2)  # the first is still held: a new buffer
    assert id(second) != first_id
    first_stream.messages.clear()  # the first call is done with its message; the second still holds its own
    third_stream, third = _receive(calls, 5, 3)
    assert id(third) == first_id  # reused, not allocated again (one spare only would have offered the held second)
    assert bytes(third) == bytes([3]) * SIZE
    del second_stream, third_stream


def test_spares_are_bounded_in_count_and_bytes():
    calls = _calls()
    streams = [_receive(calls, 1 + 2 * i, i) for i in range(SPARES + 2)]
    assert len(calls._spares) == SPARES
    assert calls._spares[-1] is streams[-1][1]  # the newest are kept
    big = SPARE_MAX // 2
    held = [_receive(calls, 101 + 2 * i, 7, big) for i in range(3)]
    assert sum(len(spare) for spare in calls._spares) <= SPARE_MAX
    assert calls._spares[-1] is held[-1][1]
    calls.drop_spares()
    assert calls.spare is None
