"""`InferenceRequest`: what a caller asks of a model, and its translation into the core's `InferRequest`.

Input tensors are not copied here: the core request holds a view of each tensor's host memory, which the
transport copies once into the request arena (small ones ride inline in the message)."""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import queue
from typing import TYPE_CHECKING, Any, Optional, Union

from pytriton.core.types import InferRequest
from pytriton.core.types import Tensor as CoreTensor
from pytriton.tritonserver._enums import MemoryType, RequestFlag
from pytriton.tritonserver._errors import InvalidArgumentError
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

    def _to_core(self) -> tuple[InferRequest, list[Tensor]]:
        """The core's request and the tensors whose memory it views (kept alive until the request ends)."""
        tensors: list[Tensor] = []
        inputs: list[CoreTensor] = []
        for name, value in self.inputs.items():
            tensor = Tensor._from_object(value, name)
            if tensor.memory_type != MemoryType.CPU and tensor.memory_type != MemoryType.CPU_PINNED:
                tensor = tensor.to_host()
            tensors.append(tensor)
            inputs.append(CoreTensor(name, tensor.data_type.name, tuple(int(d) for d in tensor.shape),
                                     _host_view(tensor)))
        return InferRequest(
            model_name=self.model.name,
            model_version="" if self.model.version < 0 else str(self.model.version),
            id=self.request_id or "",
            inputs=inputs,
            outputs=[],  # every output, as Triton's in-process API asks for
            parameters=self._core_parameters(),
        ), tensors

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
