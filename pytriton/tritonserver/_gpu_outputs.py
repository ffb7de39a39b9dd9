"""Outputs written by the worker straight into GPU memory of the request's `output_memory_allocator`.

Where a request asks for its outputs in GPU memory through an allocator, an output whose size is known before the
model runs (fixed dims: the batch dimension comes from the request's inputs; not BYTES) gets its buffer from the
allocator up front. The buffer's allocation is exported through CUDA IPC like a GPU input (`_gpu_inputs`) and passed
as the output's CUDA region (Triton's `shared_memory_region` output parameters), so the worker writes the output
there (a device-to-device copy from a GPU result, one host-to-device copy from a host one) and no response memory
is copied afterwards. Other outputs, and decoupled models (whose responses would share one buffer), are copied into
the allocator's buffers from the response's memory as before.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

from pytriton.core.types import RequestedOutput
from pytriton.tritonserver import _gpu_inputs
from pytriton.tritonserver._enums import DataType, MemoryType
from pytriton.tritonserver._memory import MemoryAllocator, MemoryBuffer
from pytriton.tritonserver._tensor import Tensor

logger = logging.getLogger("pytriton.tritonserver")

ITEM_SIZE = {"BOOL": 1, "INT8": 1, "UINT8": 1, "INT16": 2, "UINT16": 2, "FP16": 2, "BF16": 2, "INT32": 4,
             "UINT32": 4, "FP32": 4, "INT64": 8, "UINT64": 8, "FP64": 8}


@dataclasses.dataclass
class PlacedOutput:
    """An output requested by name; one the worker writes into the allocator's buffer has the export of the
    buffer's allocation and the buffer (its `requested.owned` region is set on the server's loop)."""

    requested: RequestedOutput
    device_input: _gpu_inputs.DeviceInput | None
    buffer: MemoryBuffer | None


def fixed_size(spec: Any, batch: int | None) -> int | None:
    """The bytes of output `spec` before the model runs: fixed dims (and the batch size, for a batching model)
    and a fixed-size datatype; None otherwise."""
    item = ITEM_SIZE.get(spec.datatype)
    dims: tuple[int, ...] = tuple(spec.shape)
    if item is None or any(d < 0 for d in dims):
        return None
    return math.prod(dims) * item * (batch if batch is not None else 1)


def place(config: Any, batch: int | None, allocator: MemoryAllocator, device_id: int, cupy: Any
          ) -> list[PlacedOutput]:
    """Buffers from `allocator` for the model's outputs of known size, exported for the worker to write into.

    An output the allocator does not give GPU memory for, or whose buffer CUDA cannot export, is left out (it is
    copied into the allocator's memory when the response comes)."""
    if config.decoupled or (config.batching and batch is None):
        return []
    placed: list[PlacedOutput] = []
    for spec in config.outputs:
        size = fixed_size(spec, batch if config.batching else None)
        if not size:
            continue
        try:
            buffer = allocator.allocate(size, MemoryType.GPU, device_id)
        except Exception as exc:  # noqa: BLE001 - asked again when the response comes: its error is the request's then
            logger.debug("output '%s': the allocator gave no buffer before the request (%s)", spec.name, exc)
            continue
        if buffer.memory_type != MemoryType.GPU or buffer.size < size:
            continue
        exported = _gpu_inputs.export_or_none(Tensor(DataType.UINT8, [size], buffer), cupy, spec.name)
        if exported is None:
            continue
        requested = RequestedOutput(spec.name, {"shared_memory_region": "", "shared_memory_offset": exported.offset,
                                                "shared_memory_byte_size": size})
        placed.append(PlacedOutput(requested, exported, buffer))
    return placed


def output_tensor(datatype: str, shape: tuple[int, ...], buffer: MemoryBuffer) -> Tensor:
    """The response's Tensor for an output the worker wrote into `buffer`."""
    size = math.prod(shape) * ITEM_SIZE[datatype]
    return Tensor(DataType.__members__[datatype], list(shape),
                  MemoryBuffer(buffer.data_ptr, buffer.memory_type, buffer.memory_type_id, size, buffer.owner))


__all__ = ["PlacedOutput", "fixed_size", "output_tensor", "place"]
