"""MemoryBuffer, allocators and placing host bytes into memory a (user) allocator returns."""

from __future__ import annotations

import numpy
import pytest

from pytriton.tritonserver._enums import DataType, DLDeviceType, MemoryType
from pytriton.tritonserver._errors import InternalError, InvalidArgumentError
from pytriton.tritonserver._memory import (
    CPUAllocator,
    MemoryAllocator,
    MemoryBuffer,
    copy_bytes,
    default_memory_allocators,
    parse_device_or_memory_type,
    place_in_allocated,
    resolve_allocator,
)
from pytriton.tritonserver._tensor import Tensor


class NumpyAllocator(MemoryAllocator):
    """The seed's allocator example, with numpy: remembers what it handed out."""

    def __init__(self, extra: int = 0):
        self.calls: list[tuple[int, MemoryType, int]] = []
        self.arrays: list[numpy.ndarray] = []
        self.extra = extra

    def allocate(self, size, memory_type, memory_type_id):
        self.calls.append((size, memory_type, memory_type_id))
        self.arrays.append(numpy.zeros(size + self.extra, dtype=numpy.uint8))
        return MemoryBuffer.from_dlpack(self.arrays[-1])


def test_memory_allocator_is_abstract():
    with pytest.raises(TypeError):
        MemoryAllocator()  # type: ignore[abstract]


def test_cpu_allocator():
    buffer = CPUAllocator().allocate(100, MemoryType.CPU, 0)
    assert (buffer.memory_type, buffer.memory_type_id, buffer.size) == (MemoryType.CPU, 0, 100)
    assert buffer.data_ptr == buffer.owner.ctypes.data
    assert isinstance(default_memory_allocators[MemoryType.CPU], CPUAllocator)


def test_from_dlpack_requires_dlpack():
    with pytest.raises(InvalidArgumentError, match="Object does not support DLpack protocol"):
        MemoryBuffer.from_dlpack([1, 2, 3])


def test_memory_buffer_of_a_multidimensional_array_counts_bytes():
    buffer = MemoryBuffer.from_dlpack(numpy.zeros([10, 20], dtype=numpy.float32))
    assert buffer.size == 800


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("cpu", (MemoryType.CPU, 0)),
        ("CPU_PINNED", (MemoryType.CPU_PINNED, 0)),
        ("gpu", (MemoryType.GPU, 0)),
        ("gpu:1", (MemoryType.GPU, 1)),
        ("cuda:2", (MemoryType.GPU, 2)),
        (MemoryType.GPU, (MemoryType.GPU, 0)),
        ((MemoryType.GPU, 3), (MemoryType.GPU, 3)),
        ((DLDeviceType.kDLCUDA, 1), (MemoryType.GPU, 1)),
        ((DLDeviceType.kDLCPU, 0), (MemoryType.CPU, 0)),
    ],
)
def test_parse_device_or_memory_type(device, expected):
    assert parse_device_or_memory_type(device) == expected


def test_parse_refuses_devices_triton_has_no_memory_type_for():
    with pytest.raises(InvalidArgumentError, match="Can't convert"):
        parse_device_or_memory_type((DLDeviceType.kDLMetal, 0))


def test_place_in_allocated_copies_into_the_users_buffer():
    allocator = NumpyAllocator()
    data = numpy.arange(6, dtype=numpy.int32)
    buffer = place_in_allocated(data, allocator, MemoryType.CPU, 0, "OUT")
    assert allocator.calls == [(24, MemoryType.CPU, 0)]
    assert buffer.data_ptr == allocator.arrays[0].ctypes.data
    numpy.testing.assert_array_equal(allocator.arrays[0].view(numpy.int32), data)


def test_tensor_place_keeps_its_size_in_a_larger_buffer():
    allocator = NumpyAllocator(extra=8)
    placed = Tensor._from_object(numpy.array([[1.5, 2.5]], dtype=numpy.float32))._place(allocator, MemoryType.GPU, 1)
    assert allocator.calls == [(8, MemoryType.GPU, 1)]  # the allocator need not honour the memory type
    assert (placed.memory_type, placed.size, list(placed.shape)) == (MemoryType.CPU, 8, [1, 2])
    array = numpy.from_dlpack(placed)
    assert array.ctypes.data == allocator.arrays[0].ctypes.data
    assert array.tolist() == [[1.5, 2.5]]


def test_bytes_tensor_placed_in_allocator_memory():
    allocator = NumpyAllocator()
    placed = Tensor.from_string_array(["hello", "you"])._place(allocator, MemoryType.CPU, 0, "text")
    assert placed.data_type == DataType.BYTES and placed.data_ptr == allocator.arrays[0].ctypes.data
    assert placed.to_string_array().tolist() == ["hello", "you"]


def test_allocator_failures_are_internal_errors_naming_the_output():
    class Failing(MemoryAllocator):
        def allocate(self, size, memory_type, memory_type_id):
            raise RuntimeError("out of arena")

    class Wrong(MemoryAllocator):
        def allocate(self, size, memory_type, memory_type_id):
            return numpy.zeros(size, numpy.uint8)

    class Small(MemoryAllocator):
        def allocate(self, size, memory_type, memory_type_id):
            return MemoryBuffer.from_dlpack(numpy.zeros(size - 1, numpy.uint8))

    data = numpy.zeros(4, numpy.uint8)
    with pytest.raises(InternalError, match="output 'OUT'.*out of arena"):
        place_in_allocated(data, Failing(), MemoryType.CPU, 0, "OUT")
    with pytest.raises(InternalError, match="ndarray, not a MemoryBuffer for output 'OUT'"):
        place_in_allocated(data, Wrong(), MemoryType.CPU, 0, "OUT")
    with pytest.raises(InternalError, match="3 bytes for output 'OUT', 4 requested"):
        place_in_allocated(data, Small(), MemoryType.CPU, 0, "OUT")


def test_resolve_allocator():
    mine = NumpyAllocator()
    assert resolve_allocator(mine, None) == (mine, MemoryType.CPU)
    assert resolve_allocator(mine, MemoryType.GPU) == (mine, MemoryType.GPU)
    assert resolve_allocator(None, None) == (default_memory_allocators[MemoryType.CPU], MemoryType.CPU)


def test_resolve_allocator_refuses_a_memory_type_without_default(monkeypatch):
    monkeypatch.delitem(default_memory_allocators, MemoryType.GPU, raising=False)
    with pytest.raises(InvalidArgumentError, match="not supported by default_memory_allocators"):
        resolve_allocator(None, MemoryType.GPU)


def test_copy_bytes_between_host_buffers():
    source = MemoryBuffer.from_dlpack(numpy.arange(8, dtype=numpy.uint8))
    target = MemoryBuffer.from_dlpack(numpy.zeros(8, dtype=numpy.uint8))
    copy_bytes(target, source, 5)
    assert target.owner.tolist() == [0, 1, 2, 3, 4, 0, 0, 0]
