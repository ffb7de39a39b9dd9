"""Tensors in GPU memory with cupy and torch: zero-copy DLPack, to_device both ways, GPU and pinned allocators.

Skipped without a CUDA device (and without cupy or torch respectively).
"""

from __future__ import annotations

import numpy
import pytest

from pytriton.tritonserver._enums import DataType, DLDeviceType, MemoryType
from pytriton.tritonserver._memory import (
    GPUAllocator,
    MemoryBuffer,
    PinnedAllocator,
    default_memory_allocators,
    place_in_allocated,
)
from pytriton.tritonserver._tensor import Tensor


def _cupy():
    try:
        import cupy  # noqa: PLC0415

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # noqa: BLE001 - not installed, or no driver/device
        return None


def _torch():
    try:
        import torch  # noqa: PLC0415

        return torch if torch.cuda.is_available() else None
    except ImportError:
        return None


cupy = _cupy()
torch = _torch()
needs_cupy = pytest.mark.skipif(cupy is None, reason="needs cupy and a CUDA device")
needs_torch = pytest.mark.skipif(torch is None, reason="needs torch with CUDA")
needs_gpu = pytest.mark.skipif(cupy is None and torch is None, reason="needs cupy or torch and a CUDA device")


@needs_cupy
def test_cupy_arrays_cross_without_a_copy():
    array = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)
    tensor = Tensor.from_dlpack(array)
    assert (tensor.memory_type, tensor.memory_type_id) == (MemoryType.GPU, 0)
    assert tensor.data_type == DataType.FP32 and list(tensor.shape) == [2, 3]
    assert tensor.data_ptr == array.data.ptr
    assert tensor.__dlpack_device__() == (DLDeviceType.kDLCUDA, 0)
    back = cupy.from_dlpack(tensor)
    assert back.data.ptr == array.data.ptr
    back[0, 0] = 42
    assert float(array[0, 0]) == 42


@needs_cupy
def test_seed_to_device_example():
    tensor_cpu = Tensor.from_dlpack(numpy.array([0, 1, 2], dtype=numpy.float16))
    for device in (MemoryType.GPU, (MemoryType.GPU, 0), (DLDeviceType.kDLCUDA, 0), "gpu", "gpu:0"):
        tensor_gpu = tensor_cpu.to_device(device)
        assert (tensor_gpu.memory_type, tensor_gpu.memory_type_id) == (MemoryType.GPU, 0)
    ndarray_gpu = cupy.from_dlpack(tensor_gpu)
    ndarray_gpu[0] = ndarray_gpu.mean()
    tensor_cpu = tensor_gpu.to_device("cpu")
    ndarray_cpu = numpy.from_dlpack(tensor_cpu)
    assert ndarray_cpu[0] == ndarray_gpu[0].get()
    assert tensor_gpu.to_device("gpu:0") is tensor_gpu


@needs_gpu
def test_bytes_tensors_travel_to_the_gpu_and_back():
    tensor = Tensor.from_string_array(["hello", "gpu"])
    on_gpu = tensor.to_device("gpu")
    assert on_gpu.memory_type == MemoryType.GPU and on_gpu.data_type == DataType.BYTES
    assert on_gpu.to_string_array().tolist() == ["hello", "gpu"]  # copied to the host to deserialize


@needs_gpu
def test_gpu_and_pinned_default_allocators():
    assert isinstance(default_memory_allocators[MemoryType.GPU], GPUAllocator)
    buffer = default_memory_allocators[MemoryType.GPU].allocate(200, MemoryType.GPU, 0)
    assert (buffer.memory_type, buffer.memory_type_id, buffer.size) == (MemoryType.GPU, 0, 200)
    tensor = Tensor(DataType.FP32, [50], buffer)
    assert tensor.to_host().size == 200
    pinned = PinnedAllocator().allocate(64, MemoryType.CPU_PINNED, 0)
    assert (pinned.memory_type, pinned.size) == (MemoryType.CPU_PINNED, 64)
    view = numpy.from_dlpack(Tensor(DataType.UINT8, [64], pinned))
    assert view.ctypes.data == pinned.data_ptr


@needs_gpu
def test_place_in_gpu_memory_from_an_allocator():
    data = numpy.arange(10, dtype=numpy.int64)
    buffer = place_in_allocated(data, GPUAllocator(), MemoryType.GPU, 0, "OUT")
    assert buffer.memory_type == MemoryType.GPU
    back = Tensor(DataType.INT64, [10], buffer).to_host()
    numpy.testing.assert_array_equal(numpy.from_dlpack(back), data)


@needs_torch
def test_torch_cuda_tensors_cross_without_a_copy():
    source = torch.arange(4, dtype=torch.bfloat16, device="cuda")
    tensor = Tensor.from_dlpack(source)
    assert tensor.data_type == DataType.BF16 and tensor.data_ptr == source.data_ptr()
    back = torch.from_dlpack(tensor)
    assert back.data_ptr() == source.data_ptr() and back.dtype == torch.bfloat16
    host = tensor.to_host()
    assert torch.from_dlpack(host).tolist() == [0.0, 1.0, 2.0, 3.0]


@needs_torch
def test_seed_allocator_example_with_torch():
    from pytriton.tritonserver._memory import MemoryAllocator  # noqa: PLC0415

    class TorchAllocator(MemoryAllocator):
        def allocate(self, size, memory_type, memory_type_id):
            device = "cuda" if memory_type == MemoryType.GPU else "cpu"
            return MemoryBuffer.from_dlpack(torch.zeros(size, dtype=torch.uint8, device=device))

    placed = Tensor._from_object(numpy.ones(3, numpy.float32))._place(TorchAllocator(), MemoryType.GPU, 0)
    assert placed.memory_type == MemoryType.GPU
    assert torch.from_dlpack(placed).tolist() == [1.0, 1.0, 1.0]
