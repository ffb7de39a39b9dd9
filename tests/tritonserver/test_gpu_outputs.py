"""Outputs written by the worker into the GPU buffers of a request's output_memory_allocator, without a GPU: which
outputs get a buffer before the model runs, the requested outputs and their regions, the response's Tensors on the
buffers, the regions' release. cupy and the driver call are faked (tests/tritonserver/test_gpu_inputs.py)."""

from __future__ import annotations

import types

import numpy
import pytest

from pytriton.core.shm_registry import CudaShmRegion
from pytriton.core.types import InferResponse
from pytriton.core.types import Tensor as CoreTensor
from pytriton.model_config.triton_model_config import TensorSpec
from pytriton.tritonserver import _gpu_outputs
from pytriton.tritonserver._enums import MemoryType
from pytriton.tritonserver._memory import MemoryAllocator, MemoryBuffer
from pytriton.tritonserver._request import InferenceRequest
from pytriton.tritonserver._response import RequestRun
from tests.tritonserver.fake_gpu import BASE, MODEL, FakeRuntime, handle_of, install_fake_gpu

OUTPUTS = [TensorSpec("OUT", "FP32", (2, 3)), TensorSpec("VAR", "FP32", (-1,)), TensorSpec("TEXT", "BYTES", (1,))]


@pytest.fixture
def fake_gpu(monkeypatch):
    return install_fake_gpu(monkeypatch)


def config(batching: bool = False, decoupled: bool = False):
    return types.SimpleNamespace(decoupled=decoupled, ensemble_scheduling=None, batching=batching, outputs=OUTPUTS)


class GpuAllocator(MemoryAllocator):
    """Hands out (fake) GPU memory inside one allocation, 4096 bytes apart; records what it was asked."""

    def __init__(self, memory_type: MemoryType = MemoryType.GPU):
        self.asked: list[tuple[int, MemoryType, int]] = []
        self.memory_type = memory_type

    def allocate(self, size, memory_type, memory_type_id):
        self.asked.append((size, memory_type, memory_type_id))
        return MemoryBuffer(BASE + 4096 * len(self.asked), self.memory_type, memory_type_id, size, owner=self)


def test_the_size_of_an_output_before_the_model_runs():
    assert _gpu_outputs.fixed_size(OUTPUTS[0], None) == 24
    assert _gpu_outputs.fixed_size(OUTPUTS[0], 4) == 96
    assert _gpu_outputs.fixed_size(OUTPUTS[1], None) is None  # variable
    assert _gpu_outputs.fixed_size(OUTPUTS[2], None) is None  # BYTES


def test_outputs_of_known_size_get_an_allocator_buffer_the_worker_writes_into(fake_gpu):
    allocator = GpuAllocator()
    request = InferenceRequest(MODEL, inputs={"A": numpy.ones((4, 2), numpy.float32)}, output_memory_type="gpu:1",
                               output_memory_allocator=allocator)
    core, _, _, placed = request._to_core(lambda: config(batching=True))
    assert allocator.asked == [(96, MemoryType.GPU, 1)]  # 4 (the batch) x 2 x 3 floats
    assert [o.name for o in core.outputs] == ["OUT", "VAR", "TEXT"]  # with one placed, all by name
    out = core.outputs[0]
    assert out.parameters == {"shared_memory_region": "", "shared_memory_offset": 4096, "shared_memory_byte_size": 96}
    assert placed[0].device_input.handle == handle_of(BASE) and placed[0].device_input.device_id == 1
    assert core.outputs[1].parameters == {} and placed[1].buffer is None


@pytest.mark.parametrize("case", ["host allocator", "decoupled", "no allocator", "cpu wanted", "no gpu"])
def test_otherwise_outputs_come_through_the_response_memory(fake_gpu, case):
    allocator = GpuAllocator(MemoryType.CPU if case == "host allocator" else MemoryType.GPU)
    request = InferenceRequest(MODEL, inputs={"A": numpy.ones((2,), numpy.float32)},
                               output_memory_type="cpu" if case == "cpu wanted" else "gpu",
                               output_memory_allocator=None if case == "no allocator" else allocator)
    core, _, _, placed = request._to_core(lambda: None if case == "no gpu" else config(decoupled=case == "decoupled"))
    assert core.outputs == [] and placed == []


def test_the_response_hands_the_allocator_buffers_and_the_regions_go_with_the_request(fake_gpu):
    async def infer(request):
        out = request.outputs[0]
        assert isinstance(out.owned, CudaShmRegion) and out.owned.in_use == 1
        assert runtime.core.shm.cuda_status() == []
        written = CoreTensor("OUT", "FP32", (2, 3))  # data None: the worker wrote it into the region
        return InferResponse("m", "1", "", [written])

    runtime = FakeRuntime(infer)
    runtime.core.registry.get = lambda *_: types.SimpleNamespace(config=config())
    removed: list[CudaShmRegion] = []
    runtime.core.shm.on_removed.append(removed.append)
    allocator = GpuAllocator()
    responses: list = []
    request = InferenceRequest(MODEL, inputs={"A": numpy.ones((2,), numpy.float32)}, output_memory_type="gpu",
                               output_memory_allocator=allocator)
    run = RequestRun(runtime, MODEL, request, responses.append)
    run.submit()
    runtime.loop.run_until_complete(run.task)
    (response,) = responses
    out = response.outputs["OUT"]
    assert (out.data_ptr, out.size, out.memory_type, list(out.shape)) == (BASE + 4096, 24, MemoryType.GPU, [2, 3])
    assert len(removed) == 1
    runtime.loop.close()
