"""A faked GPU for the in-process API's CUDA paths: cupy's few calls recorded, allocations at fixed addresses, GPU
tensors in them, and a runtime whose core is the test's (tests/tritonserver/test_gpu_inputs.py, test_gpu_outputs.py)."""

from __future__ import annotations

import asyncio
import types

import numpy

from pytriton.core.shm_registry import SharedMemoryRegistry
from pytriton.model_config.triton_model_config import TensorSpec
from pytriton.tritonserver import _gpu_inputs
from pytriton.tritonserver._enums import DataType, MemoryType
from pytriton.tritonserver._memory import MemoryBuffer
from pytriton.tritonserver._tensor import Tensor

BASE = 0x7F00_0000_0000
ALLOCATION = 1 << 20


class FakeCupy:
    """The few cupy calls the export makes, recorded; allocations made by `cuda.Memory` at COPY_BASE."""

    COPY_BASE = 0x7E00_0000_0000

    def __init__(self, exportable: bool = True):
        self.calls: list[tuple] = []
        self.exportable = exportable
        fake = self

        class Device:
            def __init__(self, device):
                self.device = device

            def __enter__(self):
                fake.calls.append(("device", self.device))

            def __exit__(self, *exc):
                fake.calls.append(("device_exit", self.device))

        def ipc_get_mem_handle(pointer):
            fake.calls.append(("ipcGetMemHandle", pointer))
            if not fake.exportable and pointer != fake.COPY_BASE:
                raise RuntimeError("cudaErrorInvalidValue: invalid argument")
            return pointer.to_bytes(8, "little") * 8

        runtime = types.SimpleNamespace(
            ipcGetMemHandle=ipc_get_mem_handle,
            pointerGetAttributes=lambda p: fake.calls.append(("pointerGetAttributes", p)),
            deviceSynchronize=lambda: fake.calls.append(("deviceSynchronize",)),
            memcpy=lambda dst, src, size, kind: fake.calls.append(("memcpy", dst, src, size, kind)),
        )
        self.cuda = types.SimpleNamespace(
            Device=Device, runtime=runtime,
            Memory=lambda size: types.SimpleNamespace(ptr=fake.COPY_BASE, size=size),
        )


class FakeMemory:
    """What keeps exported memory alive."""


def fake_address_range(pointer: int) -> tuple[int, int]:
    base = FakeCupy.COPY_BASE if pointer >= FakeCupy.COPY_BASE and pointer < BASE else BASE
    return base, ALLOCATION


def gpu_tensor(offset: int = 256, shape=(2, 3), device: int = 1, dtype: DataType = DataType.FP32) -> Tensor:
    size = int(numpy.prod(shape)) * 4
    return Tensor(dtype, list(shape), MemoryBuffer(BASE + offset, MemoryType.GPU, device, size, owner=object()))


MODEL = types.SimpleNamespace(name="m", version=-1, _version="")
CONFIG = types.SimpleNamespace(decoupled=False, ensemble_scheduling=None, batching=False, outputs=[
    TensorSpec("OUT", "FP32", (2, 3)), TensorSpec("VAR", "FP32", (-1,)), TensorSpec("TEXT", "BYTES", (1,))])


def install_fake_gpu(monkeypatch) -> FakeCupy:
    cupy = FakeCupy()
    monkeypatch.setattr(_gpu_inputs, "cupy_module", lambda: cupy)
    monkeypatch.setattr(_gpu_inputs, "address_range", fake_address_range)
    return cupy


def handle_of(base: int) -> bytes:
    return base.to_bytes(8, "little") * 8


class FakeRuntime:
    """What RequestRun uses of the runtime, on a loop of the test's own; the core's infer is the test's."""

    def __init__(self, infer):
        self.loop = asyncio.new_event_loop()
        config = CONFIG
        self.core = types.SimpleNamespace(shm=SharedMemoryRegistry(gpu_available=lambda: True), infer=infer,
                                          registry=types.SimpleNamespace(get=lambda *_: types.SimpleNamespace(
                                              config=config)))

    def call(self, awaitable):
        return self.loop.run_until_complete(awaitable)

    def run(self, function, *args):
        return function(*args)

    def call_soon(self, callback, *args):
        callback(*args)
        return True
