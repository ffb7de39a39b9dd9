"""The core's own types: what front-ends hand to the core, what the core hands to a model's instances, and
what comes back. No protocol and no transport appears here; every other layer is built from these.

    front-end ── InferRequest (Tensors, RegionRefs) ──► core ── ExecutionRequest (RegionSlices) ──► instance
    front-end ◄── InferResponse ─────────────────────── core ◄── ExecutionOutput ─────────────────── instance
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from pytriton.core.shm_registry import Region
    from pytriton.core.trace import Trace
    from pytriton.exceptions import ServerError, Status


# One link of a request's call chain: (model name, model version, instance name) of an execution that waits for the
# request (a BLS request made by that execution, or a step of an ensemble such a request reached; an ensemble, which
# has no instance, appears with instance ""). A client's request has no chain.
Caller = tuple[str, int, str]


@dataclasses.dataclass(slots=True)
class RegionRef:
    """Where a client says a tensor lies: a registered region's name, an offset into it, a byte size."""

    name: str
    offset: int
    byte_size: int
    owned: Region | None = None  # an in-process request's own region (not looked up by name; see shm_registry)


@dataclasses.dataclass(slots=True)
class RegionSlice:
    """A `RegionRef` the core has checked against the registry: the region itself and the bytes of it used."""

    region: Region
    offset: int  # relative to the region, as the client gave it
    byte_size: int


@dataclasses.dataclass(slots=True)
class Tensor:
    """A tensor with its wire datatype and shape: its bytes in `data` (any buffer), or, for a tensor in a client's
    shared-memory region, `data` None and `region` saying where."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: Any = None
    region: RegionRef | None = None
    # Where `data` lies in a worker's shared memory, in the transport's terms (opaque here): a tensor handed on to
    # another model (an ensemble's next step) is then passed there by reference, not copied.
    shared: Any = None

    @property
    def nbytes(self) -> int:
        data = self.data
        if data is None:
            return self.region.byte_size if self.region is not None else 0
        return data.nbytes if isinstance(data, memoryview) else len(data)


@dataclasses.dataclass
class RequestedOutput:
    name: str
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    owned: Region | None = None  # an in-process request's own output region (its parameters say where in it)


@dataclasses.dataclass
class InferRequest:
    """An inference request after wire decoding."""

    model_name: str
    model_version: str = ""
    id: str = ""
    inputs: list[Tensor] = dataclasses.field(default_factory=list)
    outputs: list[RequestedOutput] = dataclasses.field(default_factory=list)
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    trace: Trace | None = None  # set by the front-end when this request is traced
    # Set by a front-end that knows it: a hashable that stands for the request's input names, datatypes and shapes (in
    # order) and its outputs' names, its inputs all inline (`data` set), no tensor with parameters (e.g. the template
    # of a gRPC header). Requests of one model with equal layouts pass or fail the same checks but for their data's
    # sizes (`core.validation.validate_layout`); none asks for classification or a client region.
    layout: Any = dataclasses.field(default=None, compare=False, repr=False)  # (a hint: not part of the request)
    chain: tuple[Caller, ...] = ()  # the executions that wait for this request, outermost first (see `Caller`)


@dataclasses.dataclass
class InferResponse:
    """Outputs of one request. Their buffers may live in a worker's arena: call `release()` once sent."""

    model_name: str
    model_version: str
    id: str
    outputs: list[Tensor]
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    _release: Callable[[], None] | None = None
    final: bool = False  # a stream's last response, sent by the model with the final flag (no empty final follows)
    # A decoupled model's error response in a stream that goes on (`ServerCore.infer_stream(errors_inline=True)`):
    # the error in place of outputs
    error: ServerError | None = None

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


SEQUENCE_CONTROLS = 1
SEQUENCE_NOT_READY = 2


@dataclasses.dataclass(slots=True)
class ExecutionRequest:
    """One request as a model instance executes it: inputs with their bytes or their resolved regions, the
    outputs wanted, and the client regions requested outputs are to be written into."""

    inputs: list[Tensor]
    # input name -> its bytes in a client region (its Tensor.data is None), or in a server segment it was received
    # into (core/received.py: its Tensor.data is a view of them)
    input_regions: dict[str, RegionSlice]
    requested_outputs: list[str]
    output_regions: dict[str, RegionSlice]  # output name -> the client region to write it into
    parameters: dict[str, Any]
    request_id: str = ""  # the client's request id
    # A row of a sequence batch that the instance completes (SEQUENCE_* bits; 0: none): with SEQUENCE_CONTROLS it adds
    # the control inputs of the model's sequence batcher, SEQUENCE_NOT_READY marks a not-ready row (see
    # sequence_controls)
    sequence: int = 0
    chain: tuple[Caller, ...] = ()  # the request's call chain (InferRequest.chain), passed on to the instance
    # A request of an iterative sequence: (correlation id, START/END flags) as the model sees them in this execution
    # (the sequence batcher sets them: an id of its own for a request that had none, no flags once rescheduled)
    iteration: tuple[int | str, int] | None = None


@dataclasses.dataclass(slots=True)
class ExecutionOutput:
    """One request's result from an instance: outputs (a `Tensor` with `data` None was written into the client's
    region), response parameters, or the error of this request. The output buffers stay valid until `release`."""

    outputs: list[Tensor] = dataclasses.field(default_factory=list)
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    error: str = ""
    error_status: Status | None = None  # the error's status (None: INTERNAL), e.g. a Python model's TritonError code
    on_release: Callable[[], None] | None = None

    def release(self) -> None:
        release, self.on_release = self.on_release, None
        if release is not None:
            release()
