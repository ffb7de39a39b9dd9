"""Worker side of the transport: a ZMQ DEALER, the worker's response arena and the server's segments.

Blocking and single-threaded on purpose: a model instance executes one batch at a time, and a blocking
recv costs fewer wake-ups than an event loop.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import zmq

from pytriton.model_config.datatypes import (
    CODE_TO_NUMPY,
    TRITON_TO_CODE,
    deserialize_bytes_tensor,
    serialize_bytes_tensor,
)
from pytriton.proxy.arena import SharedMemoryFullError, ShmArena, is_dedicated, slot_key
from pytriton.proxy.inputs import InputSegments
from pytriton.proxy.messages import ServerToWorker, WorkerToServer, params_from_proto, params_to_proto
from pytriton.proxy.regions import ClientRegions, RegionError
from pytriton.proxy.router import DEFAULT_INLINE_MAX
from pytriton.proxy.types import Request

logger = logging.getLogger("pytriton.proxy")


_BYTES_CODE = TRITON_TO_CODE["BYTES"]


class OutputRegionError(Exception):
    """An output does not fit the client region it was requested into."""


def _too_small(name: str, have: int, need: int) -> str:
    return (
        f"shared memory size specified with the request for output '{name}' ({have} bytes) should be at least "
        f"{need} bytes to hold the results"
    )


def _to_host(array: Any) -> np.ndarray:
    """numpy arrays pass through; device arrays (cupy, or anything with __cuda_array_interface__) are copied."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "__cuda_array_interface__"):
        return __import__("cupy").asnumpy(array)
    return np.asarray(array)


class StreamCredit:
    """How far one streaming call may run ahead of its consumers: at most `window` responses sent and not yet
    taken, and (once one is out) at most `window_bytes` of their outputs; 0 is no limit. The server reports what
    was taken (CREDIT messages, a running total)."""

    __slots__ = ("bytes_ahead", "call_id", "consumed", "sent", "sizes", "window", "window_bytes")

    def __init__(self, call_id: int, window: int, window_bytes: int):
        self.call_id = call_id
        self.window = window
        self.window_bytes = window_bytes
        self.sent = 0
        self.consumed = 0
        self.sizes: collections.deque[int] = collections.deque()  # of the responses sent and not taken yet
        self.bytes_ahead = 0

    def on_sent(self, nbytes: int) -> bool:
        """Count one response sent; False once the stream must wait for credit before it sends another."""
        self.sent += 1
        if self.sent > self.consumed:  # (not taken already: credit may come early)
            self.sizes.append(nbytes)
            self.bytes_ahead += nbytes
        return not self.blocked

    def on_consumed(self, consumed: int) -> None:
        for _ in range(min(consumed, self.sent) - self.consumed):
            self.bytes_ahead -= self.sizes.popleft()
        self.consumed = max(self.consumed, consumed)

    @property
    def blocked(self) -> bool:
        ahead = self.sent - self.consumed
        if self.window and ahead >= self.window:
            return True
        return bool(self.window_bytes) and ahead > 0 and self.bytes_ahead >= self.window_bytes


class WorkerEndpoint:
    """Connects a worker to the server's ROUTER and moves tensors in and out of shared memory."""

    def __init__(
        self,
        address: str,
        identity: bytes,
        tag: str,
        server_pid: int,
        inline_max: int = DEFAULT_INLINE_MAX,
        context: zmq.Context | None = None,
        arena_kind: str = "rsp",
    ):
        self.inline_max = inline_max
        self._ctx = context or zmq.Context.instance()
        self._socket = self._ctx.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.IDENTITY, identity)
        self._socket.setsockopt(zmq.LINGER, 2000)
        self._socket.setsockopt(zmq.SNDHWM, 0)
        self._socket.setsockopt(zmq.RCVHWM, 0)
        self._socket.connect(address)
        self.arena = ShmArena(tag, arena_kind)
        self.inputs = InputSegments(tag, server_pid)  # where inputs lie: the request arena, other workers' arenas
        self.request_segments = self.inputs.server
        self.regions = ClientRegions()
        self._backlog: collections.deque[tuple[Any, list[zmq.Frame]]] = collections.deque()
        self._cancelled: set[int] = set()  # ids of calls the server cancelled that have not started or ended yet
        self._stop_seen = False  # a STOP waits in the backlog
        self.credit: StreamCredit | None = None  # of the streaming call running now, if it has a window
        self.thread = threading.get_ident()  # the only thread that may use the socket
        self._bls_ids = itertools.count(1)
        self._bls_replies: dict[int, collections.deque[tuple[Any, list[zmq.Frame]]]] = {}  # BLS calls in flight

    # ---- control -----------------------------------------------------------------------------
    def send_hello(self) -> None:
        message = WorkerToServer(kind=WorkerToServer.HELLO, pid=os.getpid(), arena=self.arena.kind)
        self._socket.send(message.SerializeToString())

    def send_fatal(self, error: str) -> None:
        message = WorkerToServer(kind=WorkerToServer.FATAL, pid=os.getpid(), error=error)
        self._socket.send(message.SerializeToString())

    def _read(self) -> tuple[Any, list[zmq.Frame]]:
        frames = self._socket.recv_multipart(copy=False)
        message = ServerToWorker.FromString(frames[0].bytes)
        for key in message.freed:
            self.arena.free_key(key)
        if message.unmap_regions:
            self.regions.unmap(list(message.unmap_regions))
        return message, frames[1:]

    def receive(self, timeout_ms: int) -> tuple[Any, list[zmq.Frame]] | None:
        """Wait for the next message; apply the slot releases it carries. None on timeout."""
        if self._backlog:
            message, frames = self._backlog.popleft()
            self._stop_seen = self._stop_seen and message.kind != ServerToWorker.STOP
            return message, frames
        if not self._socket.poll(timeout_ms, zmq.POLLIN):
            return None
        message, frames = self._read()
        if message.kind == ServerToWorker.BLS_RESULT:
            self._route_bls(message, frames)
            return None
        return message, frames

    def _collect(self) -> None:
        """Read what waits in the socket without blocking: CANCELs and CREDITs are noted, other messages wait in the
        backlog."""
        while self._socket.poll(0, zmq.POLLIN):
            message, frames = self._read()
            kind = message.kind
            if kind == ServerToWorker.BLS_RESULT:
                self._route_bls(message, frames)
            elif kind == ServerToWorker.CANCEL:
                self._cancelled.add(message.id)
            elif kind == ServerToWorker.CREDIT:
                credit = self.credit
                if credit is not None and credit.call_id == message.id:
                    credit.on_consumed(message.consumed)
            else:
                self._stop_seen = self._stop_seen or kind == ServerToWorker.STOP
                self._backlog.append((message, frames))

    def begin_stream(self, message: Any) -> None:
        """A streaming call starts: its window (if the server gave one) holds from now on."""
        self.credit = StreamCredit(message.id, message.window, message.window_bytes) if message.window else None

    def await_credit(self, alive: Callable[[], bool], poll_ms: int) -> bool:
        """Between two responses of a stream (right after `cancelled`, which read what had come): wait while it is as
        far ahead of its consumers as its window allows.
        False when it must end instead: the server cancelled it or asked us to stop, or `alive()` says to quit."""
        credit = self.credit
        if credit is None:
            return True
        while credit.blocked:
            if credit.call_id in self._cancelled or self._stop_seen or not alive():
                return False
            if self._socket.poll(poll_ms, zmq.POLLIN):
                self._collect()
        return True

    def cancelled(self, call_id: int) -> bool:
        """Between two responses of a stream: has the server cancelled `call_id`? Other messages wait."""
        self._collect()
        if call_id not in self._cancelled:
            return False
        self._cancelled.discard(call_id)
        return True

    def starting(self, call_id: int) -> bool:
        """A call is about to start: False if the server cancelled it while it waited here (its client is gone).

        Calls reach the worker in the order of their ids, so a CANCEL noted for an earlier one came after that call
        had ended: it is forgotten now."""
        self._collect()
        if not self._cancelled:
            return True
        cancelled = self._cancelled
        self._cancelled = {i for i in cancelled if i > call_id}
        return call_id not in cancelled

    # ---- BLS: this worker's own requests to the server ----------------------------------------
    def bls_send(self, model_name: str, model_version: str, inputs: list[tuple[str, str, Any]],
                 requested_outputs: list[str], parameters: dict[str, Any], decoupled: bool) -> int:
        """Send a model's own inference request upstream; its inputs go as frames or through this worker's response
        arena (the server gives those slots back when the request ends). Returns the call id for `bls_next`."""
        call_id = next(self._bls_ids)
        message = WorkerToServer(kind=WorkerToServer.BLS, id=call_id, model_name=model_name,
                                 model_version=model_version, decoupled=decoupled)
        request = message.request
        frames: list[Any] = []
        try:
            for name, datatype, array in inputs:
                self._encode_output(request.inputs.add(), name, datatype, array, frames)
        except BaseException:
            for ref in request.inputs:
                if not ref.frame and ref.nbytes:
                    self.arena.free(ref.segment, ref.offset)
            raise
        request.requested_outputs.extend(requested_outputs)
        if parameters:
            params_to_proto(parameters, request.parameters)
        self._bls_replies[call_id] = collections.deque()
        self._socket.send_multipart([message.SerializeToString(), *frames], copy=False)
        return call_id

    def fileno(self) -> int:
        """The socket's file descriptor: readable (edge-triggered, as ZMQ signals) when messages may be waiting."""
        return int(self._socket.getsockopt(zmq.FD))

    def bls_poll(self, call_id: int, timeout_ms: int) -> tuple[Any, list[zmq.Frame]] | None:
        """The next answer of BLS call `call_id`, waiting at most `timeout_ms` for one; None if none came. Other
        messages wait in the backlog (or are noted, as between two responses of a stream)."""
        replies = self._bls_replies[call_id]
        if not replies and self._socket.poll(timeout_ms, zmq.POLLIN):
            self._collect()
        if not replies:
            return None
        message, frames = replies.popleft()
        if message.final:
            del self._bls_replies[call_id]
        return message, frames

    def bls_read(self, message: Any, frames: Sequence[zmq.Frame]) -> tuple[list[tuple[str, np.ndarray]],
                                                                          dict[str, Any]]:
        """The outputs of one BLS answer as arrays of their own (copied out of shared memory, whose slots go back to
        the server at once), and its parameters."""
        outputs: list[tuple[str, np.ndarray]] = []
        keys: list[int] = []
        try:
            for item in message.responses:
                for ref in item.outputs:
                    shape = tuple(ref.shape)
                    if ref.frame:
                        buffer: Any = frames[ref.frame - 1].buffer
                    else:
                        keys.append(slot_key(ref.segment, ref.offset))
                        buffer = self.request_segments.view(ref.segment, ref.offset, ref.nbytes)
                    if ref.dtype == _BYTES_CODE:
                        array = deserialize_bytes_tensor(buffer, shape)
                    else:
                        array = np.frombuffer(buffer, dtype=CODE_TO_NUMPY[ref.dtype]).reshape(shape).copy()
                    outputs.append((ref.name, array))
                    if not ref.frame and is_dedicated(ref.segment):
                        del buffer
                        self.request_segments.release_dedicated(ref.segment)
        finally:
            self._bls_free(message)
        parameters = params_from_proto(message.responses[0].parameters) if message.responses else {}
        return outputs, parameters

    def bls_abandon(self, call_id: int) -> None:
        """Nobody waits for BLS call `call_id` any more: what came for it and what still comes is given back."""
        replies = self._bls_replies.pop(call_id, None)
        for message, _ in replies or ():
            self._bls_free(message)

    def _route_bls(self, message: Any, frames: list[zmq.Frame]) -> None:
        replies = self._bls_replies.get(message.id)
        if replies is None:  # abandoned: give its slots back
            self._bls_free(message)
        else:
            replies.append((message, frames))

    def _bls_free(self, message: Any) -> None:
        keys = [slot_key(ref.segment, ref.offset) for item in message.responses for ref in item.outputs
                if not ref.frame and not ref.region]
        if keys:
            free = WorkerToServer(kind=WorkerToServer.FREE)
            free.freed.extend(keys)
            self._socket.send(free.SerializeToString())

    # ---- requests ----------------------------------------------------------------------------
    def _input_buffer(self, ref: Any, frames: Sequence[zmq.Frame]) -> Any:
        if ref.frame:
            return frames[ref.frame - 1].buffer
        if ref.region:
            return self.regions.system_view(ref).toreadonly()
        return self.inputs.view(ref)

    def decode(
        self, message: Any, frames: Sequence[zmq.Frame]
    ) -> tuple[list[Request], list[dict[str, Any]] | None, list[str]]:
        """Turn an INFER message into the callable's requests, with numpy inputs (read-only views for fixed-size
        types); per request of the message, the client regions its outputs go to (None when no request has any);
        and per request of the message the error that answers it instead ("" for those that run: a request whose
        client region cannot be used, gone or shrunk, is left out and the others of the batch still run)."""
        decoded: list[Request] = []
        regions: list[dict[str, Any]] = []
        failed: list[str] = []
        for item in message.requests:
            regions.append({ref.name: ref for ref in item.output_regions})
            try:
                inputs = self._decode_inputs(item, frames)
            except RegionError as exc:
                failed.append(str(exc))
                continue
            failed.append("")
            parameters = params_from_proto(item.parameters) if item.parameters else {}
            decoded.append(Request(inputs, parameters, None, list(item.requested_outputs) or None))
        return decoded, (regions if any(regions) else None), failed

    def _decode_inputs(self, item: Any, frames: Sequence[zmq.Frame]) -> dict[str, np.ndarray]:
        inputs: dict[str, np.ndarray] = {}
        for ref in item.inputs:
            shape = tuple(ref.shape)
            dtype = ref.dtype
            if ref.cuda_handle:
                inputs[ref.name] = self.regions.cuda_array(ref, CODE_TO_NUMPY[dtype], shape)
                continue
            buffer = self._input_buffer(ref, frames)
            if dtype == _BYTES_CODE:
                array = deserialize_bytes_tensor(buffer, shape)
            else:
                if not buffer.readonly:
                    buffer = buffer.toreadonly()
                array = np.frombuffer(buffer, dtype=CODE_TO_NUMPY[dtype]).reshape(shape)
            inputs[ref.name] = array
        return inputs

    # ---- responses ---------------------------------------------------------------------------
    def _encode_output(
        self, ref: Any, name: str, datatype: str, array: Any, frames: list[Any], region: Any = None
    ) -> int:
        """Put one output where the server reads it: the client's region, a frame, or a slot of the arena; return
        the bytes the server holds for it (0 in a client region).

        `ref.nbytes` is set only once the bytes have their place, so a ref left half-filled by an error owns no
        arena slot (`_free_refs` frees only what was allocated)."""
        ref.name = name
        ref.dtype = TRITON_TO_CODE[datatype]
        ref.shape.extend(array.shape)
        if region is not None and region.cuda_handle:
            self._write_cuda_region(ref, region, array)
            return 0
        array = _to_host(array)
        if datatype == "BYTES":
            data: Any = serialize_bytes_tensor(array)
            nbytes = len(data)
        else:
            nbytes = array.nbytes
            data = array
        if region is not None:
            if nbytes > region.nbytes:
                raise OutputRegionError(_too_small(name, region.nbytes, nbytes))
            target = self.regions.system_view(region)
            if datatype == "BYTES":
                target[:nbytes] = data
            elif nbytes:
                np.copyto(np.frombuffer(target, dtype=array.dtype, count=array.size).reshape(array.shape), array)
            ref.region = region.region
            ref.region_id = region.region_id
            ref.offset = region.offset
            ref.nbytes = nbytes
            return 0
        if nbytes <= self.inline_max:
            if datatype != "BYTES":
                data = np.ascontiguousarray(array).reshape(-1).view(np.uint8) if nbytes else b""
            frames.append(data)
            ref.frame = len(frames)
            ref.nbytes = nbytes
            return nbytes
        try:
            segment_id, offset, view = self.arena.allocate(nbytes)
        except SharedMemoryFullError as exc:
            raise SharedMemoryFullError(f"output '{name}': {exc}") from None
        ref.segment = segment_id
        ref.offset = offset
        ref.nbytes = nbytes  # from here the slot is this ref's
        if datatype == "BYTES":
            view[:] = data
        else:
            np.copyto(np.frombuffer(view, dtype=array.dtype).reshape(array.shape), array, casting="no")
        return nbytes

    def _write_cuda_region(self, ref: Any, region: Any, array: Any) -> None:
        nbytes = array.nbytes
        if nbytes > region.nbytes:
            raise OutputRegionError(_too_small(ref.name, region.nbytes, nbytes))
        cupy = __import__("cupy")
        target = cupy.ndarray(array.shape, dtype=array.dtype, memptr=self.regions.cuda_pointer(region))
        if isinstance(array, np.ndarray):
            target.set(np.ascontiguousarray(array))  # host to device
        else:
            target[...] = array  # device to device
        ref.nbytes = nbytes
        ref.cuda_handle = region.cuda_handle
        ref.region_id = region.region_id
        ref.offset = region.offset

    def send_result(
        self,
        call_id: int,
        responses: list[tuple[list[tuple[str, str, np.ndarray]], str, dict[str, Any]]] | None,
        output_regions: list[dict[str, Any]] | None = None,
        error: str = "",
        timings: tuple[int, int] = (0, 0),
        output_started_ns: int = 0,
        final: bool = True,
        started_ns: int = 0,
    ) -> int:
        """Send the outputs of one execution: per request (outputs, error, parameters), or a batch error.

        `timings` are the input and infer durations; the output duration runs from `output_started_ns`
        until the outputs are in place; `started_ns` is when the execution began (perf_counter_ns, CLOCK_MONOTONIC on
        Linux: the server places trace timestamps with it). Returns the bytes of the outputs that the server now holds (frames and arena
        slots; not those written into client regions).
        """
        message = WorkerToServer(kind=WorkerToServer.RESULT, id=call_id, final=final or bool(error), error=error)
        message.compute_input_ns, message.compute_infer_ns = timings
        message.compute_start_ns = started_ns
        frames: list[Any] = []
        held = 0
        try:
            for index, (outputs, item_error, parameters) in enumerate(responses or ()):
                item = message.responses.add()
                if item_error:
                    item.error = item_error
                    continue
                regions = output_regions[index] if output_regions else {}
                try:
                    for name, datatype, array in outputs:
                        held += self._encode_output(item.outputs.add(), name, datatype, array, frames,
                                                    regions.get(name))
                except (OutputRegionError, RegionError) as exc:
                    self._free_refs(item)
                    del item.outputs[:]
                    item.error = str(exc)
                    continue
                if parameters:
                    params_to_proto(parameters, item.parameters)
        except MemoryError as exc:
            for ref_item in message.responses:
                self._free_refs(ref_item)
            message = WorkerToServer(kind=WorkerToServer.RESULT, id=call_id, final=True, error=str(exc))
            frames = []
            held = 0
        if output_started_ns:
            message.compute_output_ns = time.perf_counter_ns() - output_started_ns
        self._socket.send_multipart([message.SerializeToString(), *frames], copy=False)
        if message.final:
            self._release_dedicated()
        return held

    def _free_refs(self, item: Any) -> None:
        for ref in item.outputs:
            if not ref.frame and not ref.region and not ref.cuda_handle and ref.nbytes:
                self.arena.free(ref.segment, ref.offset)

    def _release_dedicated(self) -> None:
        self.inputs.release_dedicated()

    def close(self) -> None:
        self.regions.close()
        self._socket.close()
        self.inputs.close()
        self.arena.close()
