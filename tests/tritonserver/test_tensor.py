"""Tensor with numpy: zero-copy DLPack both ways, every fixed-size type, shapes, lifetimes and errors."""

from __future__ import annotations

import gc
import sys

import numpy
import pytest

from pytriton.tritonserver import _dlpack
from pytriton.tritonserver._enums import DataType, DLDeviceType, MemoryType
from pytriton.tritonserver._errors import InvalidArgumentError, UnsupportedError
from pytriton.tritonserver._memory import MemoryBuffer, default_memory_allocators
from pytriton.tritonserver._tensor import Tensor

NUMERIC = [
    (numpy.bool_, DataType.BOOL),
    (numpy.int8, DataType.INT8),
    (numpy.int16, DataType.INT16),
    (numpy.int32, DataType.INT32),
    (numpy.int64, DataType.INT64),
    (numpy.uint8, DataType.UINT8),
    (numpy.uint16, DataType.UINT16),
    (numpy.uint32, DataType.UINT32),
    (numpy.uint64, DataType.UINT64),
    (numpy.float16, DataType.FP16),
    (numpy.float32, DataType.FP32),
    (numpy.float64, DataType.FP64),
]


@pytest.mark.parametrize(("dtype", "data_type"), NUMERIC)
def test_from_dlpack_and_back_share_memory(dtype, data_type):
    array = (numpy.arange(12) % 3).astype(dtype).reshape(3, 4)
    tensor = Tensor.from_dlpack(array)
    assert tensor.data_type == data_type
    assert list(tensor.shape) == [3, 4]
    assert tensor.size == array.nbytes
    assert tensor.data_ptr == array.ctypes.data
    assert (tensor.memory_type, tensor.memory_type_id) == (MemoryType.CPU, 0)
    assert tensor.memory_buffer.owner is array
    back = numpy.from_dlpack(tensor)
    assert back.ctypes.data == array.ctypes.data
    assert back.dtype == array.dtype and back.shape == (3, 4)
    numpy.testing.assert_array_equal(back, array)


@pytest.mark.parametrize(("dtype", "data_type"), NUMERIC)
def test_from_object_keeps_numpy_memory(dtype, data_type):
    array = numpy.ones([2, 2], dtype=dtype)
    tensor = Tensor._from_object(array)
    assert tensor.data_type == data_type
    assert tensor.data_ptr == array.ctypes.data
    view = tensor._to_numpy()
    assert view.ctypes.data == array.ctypes.data
    view[0, 0] = 0
    assert array[0, 0] == 0  # a view, not a copy


def test_writes_through_a_dlpack_view_reach_the_owner():
    owner = numpy.zeros(4, numpy.float32)
    numpy.from_dlpack(Tensor.from_dlpack(owner))[1] = 7.5
    assert owner[1] == 7.5


def test_from_object_converts_lists_scalars_and_tensors():
    assert Tensor._from_object([[1, 2, 3]]).data_type == DataType.INT64
    assert list(Tensor._from_object([[1, 2, 3]]).shape) == [1, 3]
    assert Tensor._from_object([0.5]).data_type == DataType.FP64
    assert Tensor._from_object([True, False]).data_type == DataType.BOOL
    scalar = Tensor._from_object(numpy.float32(2.5))
    assert (scalar.data_type, list(scalar.shape)) == (DataType.FP32, [])
    assert numpy.from_dlpack(scalar) == numpy.float32(2.5)
    tensor = Tensor.from_dlpack(numpy.zeros(3))
    assert Tensor._from_object(tensor) is tensor


def test_from_object_makes_non_contiguous_arrays_contiguous():
    array = numpy.arange(12, dtype=numpy.int32).reshape(3, 4)[:, ::2]
    tensor = Tensor._from_object(array)
    assert list(tensor.shape) == [3, 2] and tensor.size == 24
    numpy.testing.assert_array_equal(tensor._to_numpy(), array)


def test_from_dlpack_refuses_non_contiguous_memory():
    with pytest.raises(InvalidArgumentError, match="Only contiguous memory is supported"):
        Tensor.from_dlpack(numpy.arange(12, dtype=numpy.int32).reshape(3, 4)[:, ::2])


def test_from_dlpack_refuses_types_triton_does_not_know():
    with pytest.raises(InvalidArgumentError, match="Unsupported DLPack data type"):
        Tensor.from_dlpack(numpy.zeros(2, numpy.complex64))
    with pytest.raises(InvalidArgumentError, match="Object does not support DLPack protocol"):
        Tensor.from_dlpack(object())


def test_from_object_errors_name_the_input():
    with pytest.raises(InvalidArgumentError, match="input 'x'"):
        Tensor._from_object(numpy.zeros(2, numpy.complex64), name="x")
    with pytest.raises(InvalidArgumentError, match="input 'ragged'"):
        Tensor._from_object([[1, 2], [3]], name="ragged")


def test_seed_examples():
    tensor = Tensor.from_dlpack(numpy.array([0, 1, 2], dtype=numpy.float16))
    assert tensor.data_type == DataType.FP16
    numpy_nd_array = numpy.array(tensor.to_host())
    assert numpy_nd_array.tolist() == [0.0, 1.0, 2.0] and numpy_nd_array.dtype == numpy.float16
    buffer = MemoryBuffer.from_dlpack(numpy.array([100], dtype=numpy.uint8))
    assert (buffer.memory_type, buffer.memory_type_id, buffer.size) == (MemoryType.CPU, 0, 1)


def test_dlpack_device():
    tensor = Tensor.from_dlpack(numpy.zeros(2))
    assert tensor.__dlpack_device__() == (DLDeviceType.kDLCPU, 0)
    gpu = Tensor(DataType.FP32, [1], MemoryBuffer(1 << 20, MemoryType.GPU, 1, 4, None))
    assert gpu.__dlpack_device__() == (DLDeviceType.kDLCUDA, 1)
    pinned = Tensor(DataType.FP32, [1], MemoryBuffer(1 << 20, MemoryType.CPU_PINNED, 0, 4, None))
    assert pinned.__dlpack_device__() == (DLDeviceType.kDLCPU, 0)


def test_a_buffer_from_the_cpu_allocator_viewed_with_another_type():
    buffer = default_memory_allocators[MemoryType.CPU].allocate(size=200, memory_type=MemoryType.CPU, memory_type_id=0)
    assert buffer.size == 200
    tensor = Tensor(DataType.FP32, shape=[50], memory_buffer=buffer)
    array = numpy.from_dlpack(tensor)
    assert array.ctypes.data == buffer.owner.ctypes.data
    assert array.dtype == numpy.float32 and array.nbytes == 200


def test_reference_counts_and_reshape_after_export():
    owner = numpy.ones(2**10)
    owner_data = owner.ctypes.data
    assert sys.getrefcount(owner) - 1 == 1
    tensor = Tensor.from_dlpack(owner)
    assert sys.getrefcount(owner) - 1 == 2  # the buffer's owner, nothing else
    del owner
    array = numpy.from_dlpack(tensor)
    assert array.ctypes.data == owner_data
    assert sys.getrefcount(tensor) - 1 == 2  # the exported array keeps the tensor alive
    tensor.shape = [2, 2**9]
    assert array.shape == (2**10,)
    array_2 = numpy.from_dlpack(tensor)
    del tensor
    assert array_2.shape == (2, 2**9) and array_2.ctypes.data == owner_data
    del array, array_2


def test_no_tensor_outlives_its_arrays():
    gc.collect()
    before = len(_dlpack._contexts)
    for _ in range(50):
        owner = numpy.ones(2**12)
        tensor = Tensor.from_dlpack(owner)
        array = numpy.from_dlpack(tensor)
        capsule = tensor.__dlpack__()  # never consumed: its destructor releases the context
        del owner, tensor, array, capsule
    gc.collect()
    assert len(_dlpack._contexts) == before
    assert not [obj for obj in gc.get_objects() if type(obj) is Tensor]  # (isinstance may run a proxy's __class__)


def test_bf16_crosses_dlpack_but_numpy_cannot_hold_it():
    words = numpy.array([0x3F80, 0x4000], dtype=numpy.uint16)  # 1.0 and 2.0 in bfloat16

    class BF16Producer:
        def __dlpack__(self, stream=None):
            return _dlpack.make_capsule(self, words.ctypes.data, DataType.BF16, [2], MemoryType.CPU, 0)

        def __dlpack_device__(self):
            return (DLDeviceType.kDLCPU, 0)

    tensor = Tensor.from_dlpack(BF16Producer())
    assert (tensor.data_type, list(tensor.shape), tensor.size) == (DataType.BF16, [2], 4)
    assert tensor.data_ptr == words.ctypes.data
    with pytest.raises(UnsupportedError, match="BF16"):
        tensor._to_numpy()
    assert tensor.to_host() is tensor


def test_to_device_on_host_returns_the_same_tensor():
    tensor = Tensor.from_dlpack(numpy.zeros(2))
    for device in ("cpu", "CPU:0", MemoryType.CPU, (MemoryType.CPU, 0), (DLDeviceType.kDLCPU, 0)):
        assert tensor.to_device(device) is tensor
    pinned = Tensor(DataType.FP32, [1], MemoryBuffer(1 << 20, MemoryType.CPU_PINNED, 0, 4, None))
    assert pinned.to_host() is pinned


@pytest.mark.parametrize("device", ["tpu", "gpu:x", "gpu:0:1", ("gpu", 0), 3])
def test_to_device_refuses_unknown_devices(device):
    with pytest.raises(InvalidArgumentError, match="Invalid memory type"):
        Tensor.from_dlpack(numpy.zeros(2)).to_device(device)


@pytest.mark.skipif(MemoryType.GPU in default_memory_allocators, reason="cupy or torch installed")
def test_to_device_gpu_without_cupy_or_torch_is_unsupported():
    with pytest.raises(UnsupportedError, match="not supported"):
        Tensor.from_dlpack(numpy.zeros(2)).to_device("gpu:0")


def test_device_memory_is_not_converted_to_numpy_implicitly():
    gpu = Tensor(DataType.FP32, [1], MemoryBuffer(1 << 20, MemoryType.GPU, 0, 4, None))
    with pytest.raises(UnsupportedError, match="to_host"):
        numpy.array(gpu)
    with pytest.raises(UnsupportedError):
        gpu._to_numpy()


def test_host_tensors_refuse_a_cuda_stream():
    with pytest.raises(UnsupportedError, match="stream"):
        Tensor.from_dlpack(numpy.zeros(2)).__dlpack__(stream=5)
    with pytest.raises(UnsupportedError, match="stream"):
        Tensor.from_dlpack(numpy.zeros(2)).__dlpack__(stream="default")


def test_capsule_is_versioned_only_when_the_consumer_asks():
    tensor = Tensor.from_dlpack(numpy.zeros(2))
    assert '"dltensor"' in repr(tensor.__dlpack__())
    assert '"dltensor_versioned"' in repr(tensor.__dlpack__(max_version=(1, 0)))

    class Legacy:  # a consumer of the old protocol still reads the same memory
        def __dlpack__(self, stream=None):
            return tensor.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return tensor.__dlpack_device__()

    assert numpy.from_dlpack(Legacy()).ctypes.data == tensor.data_ptr


def test_export_refuses_copies_and_other_devices():
    tensor = Tensor.from_dlpack(numpy.zeros(2))
    with pytest.raises(BufferError):
        tensor.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        tensor.__dlpack__(dl_device=(DLDeviceType.kDLCUDA, 0))
