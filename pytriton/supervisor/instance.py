"""A model instance behind a worker link: the scheduler's `Instance`, and the one translator between the core's
types and the transport's.

The core hands `ExecutionRequest`s (its tensors, client regions it resolved); the worker protocol wants
`RequestData` of `TensorData` (shm keys, absolute offsets, CUDA handles). Answers come back as RESULT messages
and leave as `ExecutionOutput`s whose buffers are views of the worker's arena, released per request. Transport
errors become `ServerError`s here, so nothing above sees a worker.
"""

from __future__ import annotations

import collections
import logging
from typing import Any, Callable

import zmq

from pytriton.core.shm_registry import CudaShmRegion
from pytriton.core.types import (
    SEQUENCE_CONTROLS,
    SEQUENCE_NOT_READY,
    ExecutionOutput,
    ExecutionRequest,
    RegionSlice,
    Tensor,
)
from pytriton.exceptions import Status, internal, unavailable
from pytriton.model_config.datatypes import CODE_TO_TRITON
from pytriton.proxy.arena import ArenaExhaustedError, is_dedicated, slot_key, split_key
from pytriton.proxy.messages import (
    FLAG_NOT_READY,
    FLAG_SEQUENCE_CONTROLS,
    ArenaSlot,
    RequestData,
    TensorData,
    carry_sequence_parameters,
    params_from_proto,
)
from pytriton.proxy.router import ProxyRouter, WorkerGoneError, WorkerLink, response_slots
from pytriton.scheduler.instance import ExecutionControl, ExecutionSink, InstanceGoneError
from pytriton.scheduler.job import NO_RESULT, RESCHEDULED, ExecutionStats

logger = logging.getLogger("pytriton.supervisor")

_STATUSES = list(Status)  # in the order of pb_utils.TritonError's codes


def _region_tensor(name: str, datatype: str, shape: tuple[int, ...], where: RegionSlice) -> TensorData:
    """A tensor in a client region, as a worker maps it: the shm key and the absolute offset in the object (or the
    CUDA handle and the offset in the allocation)."""
    region = where.region
    if isinstance(region, CudaShmRegion):
        return TensorData(name, datatype, shape, None, "", region.byte_size, where.offset, where.byte_size, region.id,
                          region.raw_handle, region.device_id)
    return TensorData(name, datatype, shape, None, region.key, region.offset + region.byte_size,
                      region.offset + where.offset, where.byte_size, region.id)


_NOT_READY: dict[int, tuple[ExecutionRequest, RequestData]] = {}  # a not-ready row's transport form (bounded)


def to_request_data(request: ExecutionRequest) -> RequestData:
    """The core's request in the transport's form."""
    not_ready = request.sequence & SEQUENCE_NOT_READY
    if not_ready:  # (the same few payloads over and over: see sequence_controls.null)
        known = _NOT_READY.get(id(request))
        if known is not None and known[0] is request:
            return known[1]
    regions = request.input_regions
    inputs = [  # (a tensor with data may lie in a region too: a large message received into shared memory)
        TensorData(t.name, t.datatype, t.shape, t.data, slot=t.shared) if t.data is not None and t.name not in regions
        else _region_tensor(t.name, t.datatype, t.shape, regions[t.name])
        for t in request.inputs
    ]
    outputs = [_region_tensor(name, "", (), where) for name, where in request.output_regions.items()
               ] if request.output_regions else []  # fmt: skip
    if request.iteration is not None:  # (the parameters go as the client sent them; the fields say what the model sees)
        parameters, (correlation_id, flags) = request.parameters, request.iteration
    elif request.parameters:
        parameters, correlation_id, flags = carry_sequence_parameters(request.parameters)
    else:
        parameters, correlation_id, flags = request.parameters, 0, 0
    if request.sequence:  # (a not-ready row has no parameters: correlation id 0, no START/END)
        flags |= (FLAG_SEQUENCE_CONTROLS if request.sequence & SEQUENCE_CONTROLS else 0) | (
            FLAG_NOT_READY if request.sequence & SEQUENCE_NOT_READY else 0)
    data = RequestData(inputs, request.requested_outputs, parameters, outputs, request.request_id, correlation_id,
                       flags, request.chain)
    if not_ready:
        if len(_NOT_READY) >= 64:
            _NOT_READY.clear()
        _NOT_READY[id(request)] = (request, data)
    return data


def _outputs(link: WorkerLink, message: Any, frames: list[zmq.Frame]) -> tuple[list[Any], list[bool] | None]:
    """One ExecutionOutput per response of a RESULT message (NO_RESULT for a request it brings nothing to); each
    releases its own arena slots. With them, each item's `final` flag, or None when none is set (read in the same
    pass: every walk over a protobuf repeated field costs microseconds; a slice of one (`[:]`, a list) is walked in
    less than half the time of the field's own iterator, and so is a repeated scalar turned into a tuple)."""
    results: list[Any] = []
    finals: list[bool] = []
    any_final = False
    segments = link.segments
    for item in message.responses[:]:
        final = item.final
        finals.append(final)
        any_final = any_final or final
        if item.absent:
            results.append(NO_RESULT)
            continue
        if item.rescheduled:
            results.append(RESCHEDULED)
            continue
        if item.error:
            code = item.error_code if item.HasField("error_code") else None
            results.append(ExecutionOutput(error=item.error, error_status=(
                _STATUSES[code] if code is not None and code < len(_STATUSES) else None)))
            continue
        outputs = []
        slots: list[int] = []
        for ref in item.outputs[:]:
            frame = ref.frame
            if frame:
                outputs.append(Tensor(ref.name, CODE_TO_TRITON[ref.dtype], tuple(ref.shape[:]),
                                      frames[frame - 1].buffer))
                continue
            datatype = CODE_TO_TRITON[ref.dtype]
            if ref.region or ref.cuda_handle:  # the worker wrote it into the client's region
                outputs.append(Tensor(ref.name, datatype, tuple(ref.shape[:])))
                continue
            assert segments is not None
            segment, offset = ref.segment, ref.offset
            data = segments.view(segment, offset, ref.nbytes)
            slots.append(slot_key(segment, offset))
            outputs.append(Tensor(ref.name, datatype, tuple(ref.shape[:]), data,
                                  shared=ArenaSlot(segments.owner_pid, segments.kind, segment, offset)))
        output = ExecutionOutput(outputs, params_from_proto(item.parameters) if item.parameters else {})
        if slots:
            output.on_release = _slot_release(link, slots)
        results.append(output)
    return results, finals if any_final else None


def _slot_release(link: WorkerLink, slots: list[int]) -> Callable[[], None]:
    def release() -> None:
        segments = link.segments
        dedicated = False
        for key in slots:
            segment_id, _ = split_key(key)
            if is_dedicated(segment_id):
                dedicated = True
                if segments is not None:
                    segments.release_dedicated(segment_id)
        link.release(slots, now=dedicated)

    return release


STREAM_WINDOW = 4096  # responses a streaming call may run ahead of its slowest consumer
STREAM_WINDOW_BYTES = 16 << 20  # ... and bytes of their outputs (past the first response)


def _held_bytes(message: Any) -> int:
    """The output bytes of a RESULT message that the server holds (inline frames and arena slots; an output written
    into a client's region holds none): what the worker counts against a stream's byte window."""
    return sum(ref.nbytes for item in message.responses for ref in item.outputs if not ref.region and not ref.cuda_handle)


class _WorkerCall:
    """One execution on a worker: turns its RESULT messages into what the scheduler's sink takes; the scheduler's
    control of it (cancel, and the credit of a stream, sent to the worker once its consumers have taken half a window
    of responses or half a window of bytes since the last credit: a worker blocked on either window always hears)."""

    __slots__ = ("instance", "sink", "count", "id", "credited", "sizes", "taken", "taken_bytes")

    def __init__(self, instance: LinkedInstance, sink: ExecutionSink, count: int):
        self.instance = instance
        self.sink = sink
        self.count = count
        self.id = 0
        self.credited = 0  # the consumed count the worker was last told
        # (streams only) the held bytes of each delivered response not yet counted as taken, how many were taken,
        # and the bytes taken since the last credit
        self.sizes: collections.deque[int] | None = collections.deque() if instance.streaming else None
        self.taken = 0
        self.taken_bytes = 0

    def on_reply(self, message: Any, frames: list[zmq.Frame]) -> None:
        link = self.instance.link
        stats = ExecutionStats(0, message.compute_input_ns, message.compute_infer_ns, message.compute_output_ns,
                               message.compute_start_ns)
        if message.error:
            link.release(response_slots(message))
            self.sink.fail(internal(
                f"Failed to process the request(s) for model '{link.label}', message: {message.error}"), stats)
            return
        if not message.responses:
            if message.final:
                self.sink.deliver([None] * self.count, stats, True)  # the end of a stream
            return
        try:
            results, finals = _outputs(link, message, frames)
        except Exception as exc:  # noqa: BLE001 - e.g. a segment that vanished with its worker
            link.release(response_slots(message))
            self.sink.fail(unavailable(f"cannot read the answer of model instance '{link.label}': {exc}"))
            return
        if self.sizes is not None:
            self.sizes.append(_held_bytes(message))
        # A stream of several requests answers each on its own: the last item of each says so.
        self.sink.deliver(results, stats, bool(message.final), finals)

    def on_gone(self, reason: str) -> None:
        self.sink.fail(unavailable(reason))

    def cancel(self) -> None:
        self.instance.router.cancel(self.instance.link, self.id)

    def cancel_requests(self, indices: list[int]) -> None:
        self.instance.router.cancel(self.instance.link, self.id, indices)

    def consumed(self, count: int) -> None:
        sizes = self.sizes
        if sizes is not None:
            while self.taken < count and sizes:
                self.taken += 1
                self.taken_bytes += sizes.popleft()
        if count - self.credited >= STREAM_WINDOW // 2 or self.taken_bytes >= STREAM_WINDOW_BYTES // 2:
            self.credited = count
            self.taken_bytes = 0
            self.instance.router.credit(self.instance.link, self.id, count)


class LinkedInstance:
    """A model instance served by one worker (a process of ours, or a thread of the user's process)."""

    def __init__(self, router: ProxyRouter, link: WorkerLink, kill: Callable[[str], None] | None = None,
                 streaming: bool = False):  # fmt: skip
        self.router = router
        self.link = link
        self.label = link.label
        self._kill = kill
        self.streaming = streaming
        self._window = (STREAM_WINDOW, STREAM_WINDOW_BYTES) if streaming else (0, 0)

    def execute(self, payloads: list[ExecutionRequest], sink: ExecutionSink) -> ExecutionControl:
        call = _WorkerCall(self, sink, len(payloads))
        try:
            call.id = self.router.submit(self.link, [to_request_data(p) for p in payloads], call, self._window)
        except WorkerGoneError as exc:  # e.g. the worker died and its watcher has not seen it yet
            raise InstanceGoneError(str(exc)) from None
        except ArenaExhaustedError as exc:
            raise unavailable(f"cannot take the request for model instance '{self.label}': {exc}") from None
        return call

    def kill(self, reason: str) -> None:
        if self._kill is not None:
            self._kill(reason)

    def __repr__(self) -> str:
        return f"LinkedInstance({self.label!r})"
