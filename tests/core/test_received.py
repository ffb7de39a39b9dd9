"""The core's receive buffers (core/received.py): the server-wide bound, when a buffer is idle, where a tensor lies in
one, and its release (once) whatever holds it last."""

from __future__ import annotations

from pytriton.core.received import ALIGN, RECEIVE_MIN, TENSOR_MIN, ReceivedBuffers, drop_frames
from pytriton.core.shm_registry import SharedMemoryRegistry
from tests.core.fakes import FakeSource


def _buffers(limit: int = 4 * RECEIVE_MIN) -> tuple[ReceivedBuffers, FakeSource, SharedMemoryRegistry]:
    registry = SharedMemoryRegistry()
    buffers = ReceivedBuffers(registry, limit)
    source = FakeSource()
    buffers.attach(source)
    return buffers, source, registry


def test_the_server_wide_bound_and_small_messages():
    buffers, source, _ = _buffers()
    assert buffers.new(RECEIVE_MIN - 1) is None  # small messages keep the ordinary path
    first = buffers.new(2 * RECEIVE_MIN)
    second = buffers.new(2 * RECEIVE_MIN)
    assert first is not None and second is not None
    assert buffers.new(RECEIVE_MIN) is None  # past the bound: ordinary memory
    first.discard()  # idle: freed at once
    assert source.freed == [first.handle] and buffers.total == 2 * RECEIVE_MIN
    assert buffers.new(RECEIVE_MIN) is not None


def test_idle_only_without_requests_and_without_views():
    buffers, source, registry = _buffers()
    buffer = buffers.new(RECEIVE_MIN)
    assert buffer is not None and buffer.idle()
    memory = buffer.memory()
    tensor = memory[1000 : 1000 + TENSOR_MIN]
    del memory
    assert not buffer.idle()  # a view is alive
    where = buffers.where(tensor)
    assert where is not None and where[0] is buffer.region and where[1] == 1000
    assert buffers.where(tensor[: TENSOR_MIN - 1]) is None  # too small to pass by reference
    assert buffers.where(memoryview(bytearray(TENSOR_MIN))) is None  # not in a receive buffer
    registry.acquire([buffer.region])  # a job refers to it
    del tensor
    assert not buffer.idle()
    buffer.discard()  # (the connection closes meanwhile)
    assert source.freed == []  # not while the job holds it
    registry.release([buffer.region])
    assert source.freed == [buffer.handle]  # with the job's end, once
    registry.release([])
    assert source.freed == [buffer.handle]


def test_a_tensor_unaligned_for_its_datatype_is_copied():
    """The model's arrays are views of the segment: passed by reference only at an offset aligned for the datatype."""
    buffers, _, _ = _buffers()
    buffer = buffers.new(RECEIVE_MIN)
    assert buffer is not None
    memory = buffer.memory()
    for offset, datatype, passed in ((1000, "FP64", True), (1004, "FP64", False), (1004, "FP32", True),
                                     (1001, "FP32", False), (1002, "FP16", True), (1001, "UINT8", True),
                                     (1001, "BYTES", True)):
        where = buffers.where(memory[offset : offset + TENSOR_MIN], datatype)
        assert (where is not None) == passed, (offset, datatype)
        assert where is None or where[1] == offset


def test_the_next_message_is_placed_where_an_unaligned_tensor_would_lie_aligned():
    buffers, _, _ = _buffers()
    buffer = buffers.new(RECEIVE_MIN + ALIGN)
    assert buffer is not None
    message = buffer.message(RECEIVE_MIN)
    assert len(message) == RECEIVE_MIN and buffer.pad == 0
    assert buffers.where(message[45 : 45 + TENSOR_MIN], "FP32") is None  # 45 bytes into the message: copied
    del message
    message = buffer.message(RECEIVE_MIN)  # the next message of this layout
    assert buffer.pad == 3
    where = buffers.where(message[45 : 45 + TENSOR_MIN], "FP32")
    assert where is not None and where[1] == 48
    assert buffers.where(message[46 : 46 + TENSOR_MIN], "FP64") is None  # (another layout: placed anew)
    del message
    assert buffer.message(RECEIVE_MIN) is not None and buffer.pad == 2


def test_a_discarded_buffer_is_not_passed_by_reference():
    buffers, _, _ = _buffers()
    buffer = buffers.new(RECEIVE_MIN)
    assert buffer is not None
    tensor = buffer.memory()[:TENSOR_MIN]
    buffer.discard()
    assert buffers.where(tensor) is None  # (its bytes are still readable here: the request copies them)
    assert bytes(tensor) == bytes(TENSOR_MIN)


def test_close_frees_every_idle_buffer_and_makes_no_more():
    buffers, source, _ = _buffers()
    made = [buffers.new(RECEIVE_MIN) for _ in range(3)]
    buffers.close()
    assert sorted(source.freed) == sorted(b.handle for b in made if b is not None)
    assert buffers.new(RECEIVE_MIN) is None


def test_drop_frames_lets_go_of_a_failed_requests_locals():
    class Held:
        pass

    import weakref

    def fail(held: Held) -> None:
        raise ValueError("failed")

    held = Held()
    ref = weakref.ref(held)
    try:
        fail(held)
    except ValueError as exc:
        error = exc
    del held
    assert ref() is not None  # the traceback's frame holds it
    drop_frames(error)
    assert ref() is None
