"""GPU inputs of in-process requests through CUDA IPC on a real GPU (skipped without cupy and a CUDA device):
a cupy or torch tensor reaches a Python model on the GPU without a host copy when its config sets
FORCE_CPU_ONLY_INPUT_TENSORS to "no", and in host memory otherwise."""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import numpy
import pytest

from pytriton import tritonserver
from pytriton.tritonserver import _gpu_inputs
from pytriton.tritonserver._tensor import Tensor

REPOSITORY = str(Path(__file__).resolve().parent.parent / "repositories" / "gpu_inputs")


def _cupy():
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # noqa: BLE001 - not installed, or no driver/device
        return None


cupy = _cupy()
pytestmark = pytest.mark.skipif(cupy is None, reason="needs cupy and a CUDA device")


@pytest.fixture(scope="module")
def server():
    server = tritonserver.Server(model_repository=REPOSITORY, exit_timeout=5).start(wait_until_ready=True, timeout=60)
    yield server
    server.stop()


def _owned_regions(server) -> dict:
    """The in-process requests' CUDA regions still registered (waits a little: the core's job ends just after the
    response)."""
    runtime = server._runtime
    deadline = time.monotonic() + 5.0
    while True:
        gc.collect()
        owned = runtime.run(lambda: dict(runtime.core.shm._owned))
        if not owned or time.monotonic() > deadline:
            return owned
        time.sleep(0.05)


def test_export_of_a_slice_inside_a_larger_allocation():
    whole = cupy.arange(4096, dtype=cupy.float32)
    part = whole[1000:1010]
    exported = _gpu_inputs.export(Tensor.from_dlpack(part), cupy)
    with cupy.cuda.Device(0):
        base, size = _gpu_inputs.address_range(part.data.ptr)
    assert base <= whole.data.ptr and part.data.ptr + part.nbytes <= base + size
    assert exported.offset == part.data.ptr - base and exported.offset >= 4000
    assert exported.allocation_size == size and exported.nbytes == 40 and len(exported.handle) == 64


def test_a_cupy_input_reaches_the_model_on_the_gpu(server):
    whole = cupy.arange(1024, dtype=cupy.float32)
    x = whole[256:264]  # not at the start of its allocation
    (response,) = list(server.model("device_in").infer(inputs={"X": x}))
    assert response.outputs["WHERE"].to_bytes_array().tolist() == [b"gpu"]
    assert numpy.from_dlpack(response.outputs["Y"]).tolist() == (cupy.asnumpy(x) * 2).tolist()
    assert _owned_regions(server) == {}  # the request's region went with it


def test_by_default_the_model_gets_the_input_in_host_memory(server):
    x = cupy.full((5,), 3.0, cupy.float32)
    (response,) = list(server.model("host_in").infer(inputs={"X": x}, output_memory_type="gpu"))
    assert response.outputs["WHERE"].to_bytes_array().tolist() == [b"cpu"]
    assert response.outputs["Y"].memory_type == tritonserver.MemoryType.GPU
    assert cupy.from_dlpack(response.outputs["Y"]).tolist() == [6.0] * 5


def test_concurrent_requests_on_one_allocation(server):
    whole = cupy.arange(64, dtype=cupy.float32)

    async def collect():
        iterators = [server.model("device_in").async_infer(inputs={"X": whole[i * 8:(i + 1) * 8]}) for i in range(8)]
        results = []
        for iterator in iterators:
            results.append([r async for r in iterator])
        return results

    results = asyncio.run(collect())
    got = [numpy.from_dlpack(rs[0].outputs["Y"]).tolist() for rs in results]
    assert got == [(numpy.arange(i * 8, (i + 1) * 8, dtype=numpy.float32) * 2).tolist() for i in range(8)]
    assert _owned_regions(server) == {}


def test_a_torch_input_reaches_the_model_on_the_gpu(server):
    torch = pytest.importorskip("torch")
    x = torch.arange(16, dtype=torch.float32, device="cuda")[4:12]
    (response,) = list(server.model("device_in").infer(inputs={"X": x}))
    assert response.outputs["WHERE"].to_bytes_array().tolist() == [b"gpu"]
    assert numpy.from_dlpack(response.outputs["Y"]).tolist() == (x.cpu().numpy() * 2).tolist()


class CupyAllocator(tritonserver.MemoryAllocator):
    """GPU buffers from cupy, kept to compare pointers."""

    def __init__(self):
        self.arrays = []

    def allocate(self, size, memory_type, memory_type_id):
        with cupy.cuda.Device(memory_type_id):
            array = cupy.empty(size, cupy.uint8)
        self.arrays.append(array)
        return tritonserver.MemoryBuffer.from_dlpack(array)


def test_an_output_of_known_size_is_written_by_the_worker_into_the_allocators_gpu_buffer(server):
    allocator = CupyAllocator()
    x = cupy.arange(4, dtype=cupy.float32)
    (response,) = list(server.model("fixed_out").infer(inputs={"X": x}, output_memory_type="gpu",
                                                          output_memory_allocator=allocator))
    y = response.outputs["Y"]
    assert y.memory_type == tritonserver.MemoryType.GPU and y.data_ptr == allocator.arrays[0].data.ptr
    assert cupy.from_dlpack(y).tolist() == [0.0, 2.0, 4.0, 6.0]
    assert _owned_regions(server) == {}
