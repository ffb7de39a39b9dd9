"""A request as an instance executes it: its shared-memory references checked and resolved to regions."""

from __future__ import annotations

from pytriton.core.received import ReceivedBuffers
from pytriton.core.shm_registry import Region, SharedMemoryRegistry
from pytriton.core.types import ExecutionRequest, InferRequest, RegionSlice


def execution_request(shm: SharedMemoryRegistry, received: ReceivedBuffers,
                      request: InferRequest) -> tuple[ExecutionRequest, list[Region]]:
    """The request's inputs and outputs in client regions, and its large inputs received into the server's receive
    segments (passed by reference, core/received.py), as region slices; with the regions, each referenced once."""
    if request.layout is not None and not received.total:  # all inline, nothing in a region or a receive segment
        return ExecutionRequest(request.inputs, {}, [o.name for o in request.outputs], {}, request.parameters,
                                request.id), []
    regions: list[Region] = []
    input_regions: dict[str, RegionSlice] = {}
    output_regions: dict[str, RegionSlice] = {}
    receiving = received if received.total else None
    for tensor in request.inputs:
        ref = tensor.region
        if tensor.data is None and ref is not None:
            region = shm.lookup(ref.name, ref.offset, ref.byte_size, ref.owned)
            regions.append(region)
            input_regions[tensor.name] = RegionSlice(region, ref.offset, ref.byte_size)
        elif receiving is not None and ref is None and (
                where := receiving.where(tensor.data, tensor.datatype)) is not None:
            regions.append(where[0])  # bytes received into a segment: passed by reference
            input_regions[tensor.name] = RegionSlice(where[0], where[1], tensor.nbytes)
    for output in request.outputs:
        params = output.parameters
        name = params.get("shared_memory_region") if params else None
        if name is None:
            continue
        offset = int(params.get("shared_memory_offset", 0))
        size = int(params["shared_memory_byte_size"])
        region = shm.lookup(name, offset, size, output.owned)
        regions.append(region)
        output_regions[output.name] = RegionSlice(region, offset, size)
    execution = ExecutionRequest(request.inputs, input_regions, [o.name for o in request.outputs],
                                 output_regions, request.parameters, request.id)
    return execution, regions
