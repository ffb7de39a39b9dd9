"""`InferenceRequest`: what a caller asks of a model, and its translation into the core's `InferRequest`.

Input tensors are not copied here: the core request holds a view of each tensor's host memory, which the
transport copies once into the request arena (small ones ride inline in the message); a tensor in GPU memory is
exported through CUDA IPC (`_gpu_inputs`) and the worker reads it where it lies."""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import queue
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from pytriton.core.types import InferRequest, RegionRef
from pytriton.core.types import Tensor as CoreTensor
from pytriton.tritonserver import _gpu_inputs
from pytriton.tritonserver._enums import MemoryType, RequestFlag
from pytriton.tritonserver._errors import InvalidArgumentError
from pytriton.tritonserver._gpu_inputs import DeviceInput
from pytriton.tritonserver._memory import MemoryAllocator
from pytriton.tritonserver._tensor import Tensor

if TYPE_CHECKING:
    from pytriton.tritonserver._model import Model


@dataclasses.dataclass
class InferenceRequest:
    """An inference request: inputs (Tensors or anything DLPack- or numpy-convertible), request fields, where the
    outputs go (`output_memory_type`, `output_memory_allocator`) and an optional `response_queue`."""

    model: Model
    request_id: Optional[str] = None
    flags: int = 0
    correlation_id: Optional[Union[int, str]] = None
    priority: int = 0
    timeout: int = 0
    inputs: dict[str, Union[Tensor, Any]] = dataclasses.field(default_factory=dict)
    parameters: dict[str, Union[str, int, bool]] = dataclasses.field(default_factory=dict)
    output_memory_type: Optional[Any] = None
    output_memory_allocator: Optional[MemoryAllocator] = None
    response_queue: Optional[Union[queue.SimpleQueue, asyncio.Queue]] = None

    def _to_core(self, device_inputs: Callable[[], bool] | None = None
                 ) -> tuple[InferRequest, list[Tensor], list[tuple[CoreTensor, DeviceInput]]]:
        """The core's request, the tensors whose memory it views (kept alive until the request ends), and its GPU
        inputs exported through CUDA IPC (each with the core tensor whose `region.owned` is still to be set).

        A GPU input goes by CUDA IPC when `device_inputs()` (asked once, at the first one) allows it and cupy is
        installed; otherwise it is copied to host memory."""
        tensors: list[Tensor] = []
        inputs: list[CoreTensor] = []
        exported: list[tuple[CoreTensor, DeviceInput]] = []
        ipc: Optional[bool] = None
        cupy = None
        for name, value in self.inputs.items():
            tensor = Tensor._from_object(value, name)
            shape = tuple(int(d) for d in tensor.shape)
            if _gpu_inputs.takes_ipc(tensor):
                if ipc is None:
                    cupy = _gpu_inputs.cupy_module()
                    ipc = cupy is not None and device_inputs is not None and device_inputs()
                device_input = _gpu_inputs.export_or_none(tensor, cupy, name) if ipc else None
                if device_input is not None:
                    core_tensor = CoreTensor(name, tensor.data_type.name, shape,
                                             region=RegionRef("", device_input.offset, device_input.nbytes))
                    inputs.append(core_tensor)
                    exported.append((core_tensor, device_input))
                    continue
            if tensor.memory_type != MemoryType.CPU and tensor.memory_type != MemoryType.CPU_PINNED:
                tensor = tensor.to_host()
            tensors.append(tensor)
            inputs.append(CoreTensor(name, tensor.data_type.name, shape, _host_view(tensor)))
        return InferRequest(
            model_name=self.model.name,
            model_version="" if self.model.version < 0 else str(self.model.version),
            id=self.request_id or "",
            inputs=inputs,
            outputs=[],  # every output, as Triton's in-process API asks for
            parameters=self._core_parameters(),
        ), tensors, exported

    def _core_parameters(self) -> dict[str, Any]:
        """Request parameters with the request fields as the network front-ends pass them to the core."""
        parameters: dict[str, Any] = {}
        for key, value in self.parameters.items():
            if not isinstance(value, (str, int, float, bool)):
                raise InvalidArgumentError(f"Value type {type(value).__name__} is not a valid Request Parameter")
            parameters[key] = value
        if self.priority:
            if self.priority < 0:
                raise InvalidArgumentError("invalid value for 'priority', expected value >= 0.")
            parameters["priority"] = int(self.priority)
        if self.timeout:
            parameters["timeout"] = int(self.timeout)
        if self.correlation_id is not None:
            parameters["sequence_id"] = self.correlation_id
        if self.flags & RequestFlag.SEQUENCE_START:
            parameters["sequence_start"] = True
        if self.flags & RequestFlag.SEQUENCE_END:
            parameters["sequence_end"] = True
        return parameters


def _host_view(tensor: Tensor) -> memoryview:
    """A byte view of a host tensor's memory (no copy); its owner must outlive it."""
    size = int(tensor.size)
    if size == 0:
        return memoryview(b"")
    buffer = (ctypes.c_ubyte * size).from_address(int(tensor.data_ptr))
    return memoryview(buffer).cast("B")


__all__ = ["InferenceRequest"]
