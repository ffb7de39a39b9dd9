"""`InferenceRequest`: what a caller asks of a model, and its translation into the core's `InferRequest`.

Input tensors are not copied here: the core request holds a view of each tensor's host memory, which the
transport copies once into the request arena (small ones ride inline in the message); a tensor in GPU memory is
exported through CUDA IPC (`_gpu_inputs`) and the worker reads it where it lies."""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import queue
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Union

from pytriton.core.types import InferRequest, RegionRef, RequestedOutput
from pytriton.core.types import Tensor as CoreTensor
from pytriton.tritonserver import _gpu_inputs, _gpu_outputs
from pytriton.tritonserver._enums import MemoryType, RequestFlag
from pytriton.tritonserver._errors import InvalidArgumentError
from pytriton.tritonserver._gpu_inputs import DeviceInput
from pytriton.tritonserver._gpu_outputs import PlacedOutput
from pytriton.tritonserver._memory import MemoryAllocator, parse_device_or_memory_type
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
    response_queue: Optional[Union[queue.SimpleQueue[Any], asyncio.Queue[Any]]] = None

    def _to_core(self, device_config: Callable[[], Any] | None = None) -> CoreRequest:
        """The core's request, the tensors whose memory it views (kept alive until the request ends), its GPU
        inputs exported through CUDA IPC (each with the core tensor whose `region.owned` is still to be set) and
        the outputs the worker writes into the allocator's GPU memory.

        `device_config()` (asked once, where GPU memory is involved) gives the model's configuration where CUDA IPC
        may be used (None: not); without cupy it is not. A GPU input not passed by IPC is copied to host memory."""
        tensors: list[Tensor] = []
        inputs: list[CoreTensor] = []
        exported: list[tuple[CoreTensor, DeviceInput]] = []
        asked: list[Any] = []

        def ipc_config() -> Any:
            if not asked:
                cupy = _gpu_inputs.cupy_module()
                asked.append((cupy, device_config() if cupy is not None and device_config is not None else None))
            return asked[0]

        for name, value in self.inputs.items():
            tensor = Tensor._from_object(value, name)
            shape = tuple(int(d) for d in tensor.shape)
            if _gpu_inputs.takes_ipc(tensor):
                cupy, config = ipc_config()
                device_input = _gpu_inputs.export_or_none(tensor, cupy, name) if config is not None else None
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
        placed = self._placed_outputs(inputs, ipc_config)
        return CoreRequest(InferRequest(
            model_name=self.model.name,
            model_version="" if self.model.version < 0 else str(self.model.version),
            id=self.request_id or "",
            inputs=inputs,
            # every output, as Triton's in-process API asks for (named one by one where some go to GPU buffers)
            outputs=[p.requested for p in placed] if placed else [],
            parameters=self._core_parameters(),
        ), tensors, exported, placed)

    def _placed_outputs(self, inputs: list[CoreTensor], ipc_config: Callable[[], Any]) -> list[PlacedOutput]:
        """Outputs written by the worker into GPU buffers of the request's allocator (`_gpu_outputs`); with any,
        every other output of the model is requested by name too."""
        if self.output_memory_allocator is None or self.output_memory_type is None:
            return []
        memory_type, device_id = parse_device_or_memory_type(self.output_memory_type)
        if memory_type != MemoryType.GPU:
            return []
        cupy, config = ipc_config()
        if config is None:
            return []
        batch = inputs[0].shape[0] if inputs and inputs[0].shape else None
        placed = _gpu_outputs.place(config, batch, self.output_memory_allocator, device_id, cupy)
        if placed:
            names = {p.requested.name for p in placed}
            placed += [PlacedOutput(RequestedOutput(spec.name), None, None) for spec in config.outputs
                       if spec.name not in names]
        return placed

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


class CoreRequest(NamedTuple):
    """What `InferenceRequest._to_core` makes of a request."""

    request: InferRequest
    tensors: list[Tensor]  # whose host memory the request views
    exported: list[tuple[CoreTensor, DeviceInput]]  # GPU inputs passed through CUDA IPC
    placed: list[PlacedOutput]  # outputs requested by name; those with a buffer are written there by the worker


def _host_view(tensor: Tensor) -> memoryview:
    """A byte view of a host tensor's memory (no copy); its owner must outlive it."""
    size = int(tensor.size)
    if size == 0:
        return memoryview(b"")
    buffer = (ctypes.c_ubyte * size).from_address(int(tensor.data_ptr))
    return memoryview(buffer).cast("B")


__all__ = ["InferenceRequest"]
