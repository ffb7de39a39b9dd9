"""GPU inputs of in-process requests through CUDA IPC, without a GPU: the path chosen, the export (allocation
base, handle, offset), the request's own CUDA region (ownership, sharing, release), the Python backend's
FORCE_CPU_ONLY_INPUT_TENSORS. cupy and the driver call are faked; the logic is the real one.
(tests/tritonserver/test_gpu_inputs_device.py runs the same on a GPU.)"""

from __future__ import annotations

import types
import weakref

import numpy
import pytest

from pytriton.backends import pb_utils
from pytriton.backends.python_model import PythonModelBackend, force_cpu_only_inputs
from pytriton.core.shm_registry import CudaShmRegion, SharedMemoryRegistry
from pytriton.core.types import InferResponse
from pytriton.exceptions import ServerError, Status
from pytriton.tritonserver import _gpu_inputs
from pytriton.tritonserver._enums import DataType
from pytriton.tritonserver._request import InferenceRequest
from pytriton.tritonserver._response import RequestRun
from pytriton.tritonserver._tensor import Tensor
from tests.tritonserver.fake_gpu import (
    ALLOCATION,
    BASE,
    CONFIG,
    MODEL,
    FakeCupy,
    FakeMemory,
    FakeRuntime,
    fake_address_range,
    gpu_tensor,
    handle_of,
    install_fake_gpu,
)


@pytest.fixture
def fake_gpu(monkeypatch):
    return install_fake_gpu(monkeypatch)


# ---- the export ---------------------------------------------------------------------------------------------------
def test_export_takes_the_handle_of_the_allocation_base_and_the_offset_of_the_tensor_in_it(fake_gpu):
    tensor = gpu_tensor(offset=4096)
    exported = _gpu_inputs.export(tensor, fake_gpu)
    assert (exported.handle, exported.device_id, exported.allocation_size) == (handle_of(BASE), 1, ALLOCATION)
    assert (exported.offset, exported.nbytes) == (4096, 24)
    assert exported.keep == [tensor]
    # on the tensor's device, after the producer's work is done
    assert fake_gpu.calls == [("device", 1), ("pointerGetAttributes", BASE + 4096), ("deviceSynchronize",),
                              ("ipcGetMemHandle", BASE), ("device_exit", 1)]


def test_memory_ipc_cannot_export_is_copied_on_the_device_first(monkeypatch):
    cupy = FakeCupy(exportable=False)
    monkeypatch.setattr(_gpu_inputs, "address_range", fake_address_range)
    exported = _gpu_inputs.export(gpu_tensor(offset=64), cupy)
    assert ("memcpy", FakeCupy.COPY_BASE, BASE + 64, 24, 3) in cupy.calls
    assert cupy.calls[-3:] == [("deviceSynchronize",), ("ipcGetMemHandle", FakeCupy.COPY_BASE), ("device_exit", 1)]
    assert (exported.handle, exported.offset, exported.nbytes) == (handle_of(FakeCupy.COPY_BASE), 0, 24)
    assert len(exported.keep) == 2  # the tensor and the copy


def test_where_cuda_refuses_even_the_copy_the_input_goes_through_host_memory(monkeypatch, fake_gpu, caplog):
    def refuse(pointer):
        raise RuntimeError("cudaErrorInvalidValue: invalid argument")

    fake_gpu.cuda.runtime.ipcGetMemHandle = refuse
    monkeypatch.setattr(Tensor, "to_host", lambda self: Tensor.from_dlpack(numpy.zeros(6, numpy.float32)))
    core, _, exported, _ = InferenceRequest(MODEL, inputs={"A": gpu_tensor()})._to_core(lambda: CONFIG)
    assert exported == [] and core.inputs[0].region is None and bytes(core.inputs[0].data) == bytes(24)
    assert "GPU input 'A' cannot be passed through CUDA IPC (cudaErrorInvalidValue" in caplog.text


def test_which_tensors_take_the_ipc_path():
    assert _gpu_inputs.takes_ipc(gpu_tensor())
    assert not _gpu_inputs.takes_ipc(gpu_tensor(shape=(0, 3)))  # nothing to map
    assert not _gpu_inputs.takes_ipc(gpu_tensor(dtype=DataType.BYTES))
    assert not _gpu_inputs.takes_ipc(Tensor.from_dlpack(numpy.ones(3, numpy.float32)))


# ---- the request --------------------------------------------------------------------------------------------------
def test_gpu_inputs_become_references_into_an_ipc_region_host_inputs_stay_views(fake_gpu):
    asked = []
    request = InferenceRequest(MODEL, inputs={"A": gpu_tensor(offset=512), "B": numpy.ones(4, numpy.int32),
                                              "C": gpu_tensor(offset=0, shape=(1,))})
    core, tensors, exported, placed = request._to_core(lambda: asked.append(1) or CONFIG)
    assert asked == [1]  # asked once
    a, b, c = core.inputs
    assert a.data is None and (a.region.name, a.region.offset, a.region.byte_size) == ("", 512, 24)
    assert a.region.owned is None  # set on the server's loop, when the region is registered
    assert (a.datatype, a.shape) == ("FP32", (2, 3))
    assert bytes(b.data) == numpy.ones(4, numpy.int32).tobytes() and b.region is None
    assert (c.region.offset, c.region.byte_size) == (0, 4)
    assert [t for t, _ in exported] == [a, c] and exported[0][1].handle == handle_of(BASE)
    assert len(tensors) == 1  # the host input's view; the GPU ones are kept by their export
    assert placed == [] and core.outputs == []  # every output, from the response's memory


def test_without_cupy_or_when_the_server_declines_gpu_inputs_go_through_host_memory(monkeypatch, fake_gpu):
    moved = []

    def to_host(self):
        moved.append(self)
        return Tensor.from_dlpack(numpy.zeros(self.shape, numpy.float32))

    monkeypatch.setattr(Tensor, "to_host", to_host)
    core, _, exported, _ = InferenceRequest(MODEL, inputs={"A": gpu_tensor()})._to_core(lambda: None)
    assert exported == [] and core.inputs[0].region is None and bytes(core.inputs[0].data) == bytes(24)
    monkeypatch.setattr(_gpu_inputs, "cupy_module", lambda: None)
    core, _, exported, _ = InferenceRequest(MODEL, inputs={"A": gpu_tensor()})._to_core(lambda: CONFIG)
    assert exported == [] and core.inputs[0].region is None
    assert len(moved) == 2 and not [c for c in fake_gpu.calls if c[0] == "ipcGetMemHandle"]


# ---- the request's own region -------------------------------------------------------------------------------------
def test_an_owned_region_is_unlisted_unreachable_by_name_and_goes_when_its_last_user_ends():
    registry = SharedMemoryRegistry(gpu_available=lambda: True)
    removed: list[CudaShmRegion] = []
    registry.on_removed.append(removed.append)
    kept = FakeMemory()
    watch = weakref.ref(kept)
    region = registry.own_cuda(handle_of(BASE), 0, ALLOCATION, kept)
    del kept
    assert registry.cuda_status() == [] and len(registry) == 0
    with pytest.raises(ServerError, match="Unable to find shared memory region"):
        registry.lookup(region.name, 0, 4)
    registry.unregister(CudaShmRegion)  # a client's "unregister all" does not touch it
    assert registry.lookup("", 256, 24, owned=region) is region
    with pytest.raises(ServerError, match="Invalid offset \\+ byte size"):
        registry.lookup("", ALLOCATION - 8, 24, owned=region)
    registry.acquire([region])  # the core's job
    registry.release([region])  # the request ends first (e.g. cancelled): the job still reads it
    assert removed == [] and watch() is not None
    registry.release([region])
    assert removed == [region] and watch() is None  # the workers unmap it; the exported memory may go


def test_requests_on_one_allocation_share_the_workers_mapping_until_the_last_ends():
    registry = SharedMemoryRegistry()
    removed: list[CudaShmRegion] = []
    registry.on_removed.append(removed.append)
    first = registry.own_cuda(handle_of(BASE), 0, ALLOCATION, "a")
    second = registry.own_cuda(handle_of(BASE), 0, ALLOCATION, "b")
    other = registry.own_cuda(handle_of(BASE), 1, ALLOCATION, "c")  # another device: another mapping
    assert first.id == second.id != other.id
    registry.release([first])
    assert removed == [] and first.keep is None and second.keep == ["b"]  # each keeps only its own memory
    registry.release([second, other])
    assert [r.id for r in removed] == [first.id, other.id]
    assert registry.own_cuda(handle_of(BASE), 0, ALLOCATION, "d").id not in (first.id, other.id)  # mapped anew


# ---- the request's run on the server's loop -----------------------------------------------------------------------
def test_a_request_registers_its_regions_on_the_loop_and_releases_them_when_it_ends(fake_gpu):
    seen = []

    async def infer(request):
        ref = request.inputs[0].region
        seen.append((ref.owned.raw_handle, ref.offset, ref.owned.in_use, runtime.core.shm.cuda_status()))
        return InferResponse("m", "1", "", [])

    runtime = FakeRuntime(infer)
    removed: list[CudaShmRegion] = []
    runtime.core.shm.on_removed.append(removed.append)
    responses: list = []
    run = RequestRun(runtime, MODEL, InferenceRequest(MODEL, inputs={"A": gpu_tensor(offset=1024)}), responses.append)
    run.submit()
    runtime.loop.run_until_complete(run.task)
    assert seen == [(handle_of(BASE), 1024, 1, [])]
    assert [r.final for r in responses] == [True] and len(removed) == 1 and removed[0].keep is None
    runtime.loop.close()


def test_a_request_refused_at_submission_releases_its_regions(fake_gpu):
    async def infer(request):
        raise ServerError(Status.INVALID_ARG, "unexpected inference input 'A' for model 'm'")

    runtime = FakeRuntime(infer)
    removed: list[CudaShmRegion] = []
    runtime.core.shm.on_removed.append(removed.append)
    run = RequestRun(runtime, MODEL, InferenceRequest(MODEL, inputs={"A": gpu_tensor()}), lambda r: None)
    with pytest.raises(ServerError, match="unexpected inference input 'A'"):
        run.submit()
    assert len(removed) == 1
    runtime.loop.close()


def test_a_server_without_a_gpu_or_an_ensemble_takes_host_copies(fake_gpu, monkeypatch):
    monkeypatch.setattr(Tensor, "to_host", lambda self: Tensor.from_dlpack(numpy.zeros(6, numpy.float32)))
    got = []

    async def infer(request):
        got.append(request.inputs[0].region)
        return InferResponse("m", "1", "", [])

    for gpu, ensemble in ((False, None), (True, {"step": []})):
        runtime = FakeRuntime(infer)
        runtime.core.shm.gpu_available = lambda gpu=gpu: gpu
        runtime.core.registry.get = lambda *_, e=ensemble: types.SimpleNamespace(
            config=types.SimpleNamespace(decoupled=False, ensemble_scheduling=e, outputs=[]))
        run = RequestRun(runtime, MODEL, InferenceRequest(MODEL, inputs={"A": gpu_tensor()}), lambda r: None)
        run.submit()
        runtime.loop.run_until_complete(run.task)
        runtime.loop.close()
    assert got == [None, None]


# ---- the Python backend -------------------------------------------------------------------------------------------
class DeviceArray:
    """Stands for a cupy array: __cuda_array_interface__, shape, dtype, reshape, __dlpack__."""

    def __init__(self, host: numpy.ndarray):
        self.host = host
        self.shape, self.dtype = host.shape, host.dtype
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str, "version": 3}

    def __dlpack__(self, **kwargs):
        return ("device capsule", self)

    def reshape(self, *shape):
        return DeviceArray(self.host.reshape(*shape))


def input_tensor(parameters: dict[str, str], array) -> pb_utils.Tensor:
    config = types.SimpleNamespace(backend_parameters=parameters, input_by_name={})
    backend = types.SimpleNamespace(config=config, _model_view=lambda name, a: a)
    return PythonModelBackend._input_tensor(backend, "X", array)


@pytest.mark.parametrize("value", ["no", "NO", "false", "off", "0"])
def test_force_cpu_only_input_tensors_no_hands_device_tensors(value):
    array = DeviceArray(numpy.arange(6, dtype=numpy.float32))
    tensor = input_tensor({"FORCE_CPU_ONLY_INPUT_TENSORS": value}, array)
    assert not tensor.is_cpu() and tensor.shape() == [6] and tensor.to_dlpack() == ("device capsule", array)
    with pytest.raises(pb_utils.TritonModelException, match="Tensor is stored in GPU and cannot be converted to NumPy"):
        tensor.as_numpy()


@pytest.mark.parametrize("parameters", [{}, {"FORCE_CPU_ONLY_INPUT_TENSORS": "yes"}])
def test_by_default_device_inputs_reach_python_models_in_host_memory(monkeypatch, parameters):
    monkeypatch.setitem(__import__("sys").modules, "cupy", types.SimpleNamespace(asnumpy=lambda a: a.host.copy()))
    tensor = input_tensor(parameters, DeviceArray(numpy.arange(6, dtype=numpy.float32)))
    assert tensor.is_cpu() and tensor.as_numpy().tolist() == [0, 1, 2, 3, 4, 5]
    assert force_cpu_only_inputs(types.SimpleNamespace(backend_parameters=parameters))


def test_host_inputs_are_untouched_whatever_the_setting():
    array = numpy.arange(3)
    tensor = input_tensor({"FORCE_CPU_ONLY_INPUT_TENSORS": "no"}, array)
    assert tensor.is_cpu() and tensor.as_numpy() is array



def test_the_core_resolves_owned_regions_of_inputs_and_outputs_without_their_names():
    from pytriton.core.server_core import ServerCore
    from pytriton.core.types import InferRequest, RegionRef, RequestedOutput
    from pytriton.core.types import Tensor as CoreTensor

    core = ServerCore(gpu_available=True)
    inp = core.shm.own_cuda(handle_of(BASE), 0, ALLOCATION, "in")
    out = core.shm.own_cuda(handle_of(FakeCupy.COPY_BASE), 0, ALLOCATION, "out")
    request = InferRequest("m", inputs=[CoreTensor("A", "FP32", (6,), region=RegionRef("", 512, 24, owned=inp))],
                           outputs=[RequestedOutput("Y", {"shared_memory_region": "", "shared_memory_offset": 64,
                                                          "shared_memory_byte_size": 24}, owned=out)])
    execution, regions = core.execution_request(request)
    assert regions == [inp, out]
    assert (execution.input_regions["A"].region, execution.input_regions["A"].offset) == (inp, 512)
    assert (execution.output_regions["Y"].region, execution.output_regions["Y"].byte_size) == (out, 24)
    request.inputs[0].region.owned = None  # a network client cannot name it
    with pytest.raises(ServerError, match="Unable to find shared memory region: ''"):
        core.execution_request(request)
