"""Worker side of the transport: a ZMQ DEALER, the worker's response arena and the server's segments.

Blocking on purpose: a model instance executes one batch at a time, and a blocking wait costs fewer wake-ups than an
event loop. The worker's loop runs in one thread, but a model's own threads may send BLS requests and ask whether a
request was cancelled: one lock guards the socket and the arenas, and whichever thread waits watches the socket for
all the others (the rest wait on a condition and are woken when something for them was read).
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import os
import select
import threading
import time
from collections.abc import Callable, Sequence
from math import prod
from typing import Any, cast

import numpy as np
import zmq

from pytriton.config.env import DEFAULT_INLINE_MAX
from pytriton.model_config.datatypes import (
    CODE_TO_NUMPY,
    TRITON_TO_CODE,
    deserialize_bytes_tensor,
    serialize_bytes_tensor,
)
from pytriton.proxy._bls_endpoint import BlsEndpoint
from pytriton.proxy._zmq import readable, recv_frames, send_frames
from pytriton.proxy.arena import SharedMemoryFullError, ShmArena, is_dedicated, slot_key
from pytriton.proxy.bigcopy import OutputCopier
from pytriton.proxy.credit import StreamCredit
from pytriton.proxy.inputs import InputSegments
from pytriton.proxy.messages import (
    FLAG_NOT_READY,
    ServerToWorker,
    WorkerToServer,
    decode_request_fields,
    encode_request_fields,
    params_from_proto,
    params_to_proto,
)
from pytriton.proxy.regions import ClientRegions, OutputRegionError, RegionError, too_small, write_cuda_region
from pytriton.proxy.types import Request

logger = logging.getLogger("pytriton.proxy")


_BYTES_CODE = TRITON_TO_CODE["BYTES"]
# In the responses `send_result` sends: the model gave this request back to run again (a Python-backend model's
# TRITONSERVER_REQUEST_RELEASE_RESCHEDULE), sent as an item flagged `rescheduled` and `final`
RESCHEDULED_RESPONSE: Any = ([], "rescheduled", {})
MAX_WAIT_S = 0.25  # the longest the watching thread sleeps without looking at the socket (an edge may be missed)


def _to_host(array: Any) -> np.ndarray:
    """numpy arrays pass through; device arrays (cupy, or anything with __cuda_array_interface__) are copied."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "__cuda_array_interface__"):
        return cast(np.ndarray, __import__("cupy").asnumpy(array))
    return np.asarray(array)


class WorkerEndpoint(BlsEndpoint):
    """Connects a worker to the server's ROUTER and moves tensors in and out of shared memory."""

    def __init__(
        self,
        address: str,
        identity: bytes,
        tag: str,
        server_pid: int,
        inline_max: int = DEFAULT_INLINE_MAX,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
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
        self.copier = OutputCopier(name="pytriton-output-copy")  # large outputs copied by several threads
        self._backlog: collections.deque[tuple[Any, list[zmq.Frame]]] = collections.deque()
        self._cancelled: set[int] = set()  # ids of calls the server cancelled that have not started or ended yet
        self._gone_all: set[int] = set()  # calls whose clients all left (what `request_cancelled` answers from)
        self._gone_items: dict[int, set[int]] = {}  # call id -> indices of its requests whose clients left
        self._stop_seen = False  # a STOP waits in the backlog
        self.credit: StreamCredit | None = None  # of the streaming call running now, if it has a window
        self._bls_ids = itertools.count(1)
        self._bls_replies: dict[int, collections.deque[tuple[Any, list[zmq.Frame]]]] = {}  # BLS calls in flight
        self._hello_sent = False  # until then BLS inputs ride as frames (the server maps the arena once told)
        self._lock = threading.RLock()  # the socket, the arenas and the state above
        self._cond = threading.Condition(self._lock)
        self._reader: int | None = None  # the thread that watches the socket now (without the lock)
        self._fresh = False  # the message `receive` returned last was read by a drain that emptied the socket
        self._fd = int(self._socket.getsockopt(zmq.FD))
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # wakes the reader: something came
        self.before_result: Callable[[], None] | None = None  # runs first in send_result (custom metrics' updates)

    # ---- control -----------------------------------------------------------------------------
    def send_hello(self, warmup: list[tuple[int, int]] | None = None) -> None:
        """The worker is up; `warmup`: the (request count, duration ns) of each warm-up execution it ran first."""
        message = WorkerToServer(kind=WorkerToServer.HELLO, pid=os.getpid(), arena=self.arena.kind,
                                 control=json.dumps({"warmup": warmup}) if warmup else "")
        self._send([message.SerializeToString()])
        self._hello_sent = True

    def send_fatal(self, error: str) -> None:
        message = WorkerToServer(kind=WorkerToServer.FATAL, pid=os.getpid(), error=error)
        self._send([message.SerializeToString()])

    def _send(self, frames: list[Any]) -> None:
        """Send one message. A send can take the edge that announces what came meanwhile: if another thread watches
        the socket now, what came is read for it; otherwise nobody needs it yet (every wait reads the socket before
        it watches the descriptor, and `cancelled`, `request_cancelled` read it themselves), and one readiness check
        per request is saved."""
        with self._lock:
            send_frames(self._socket, frames)
            self._fresh = False
            if self._reader is not None:
                self._drain()

    def _drain(self) -> None:
        """(Lock held) read what waits in the socket without blocking: CANCELs, CREDITs and BLS answers are noted,
        other messages wait in the backlog; waiting threads hear of it."""
        got = False
        while readable(self._socket):
            got = True
            message, frames = self._read()
            kind = message.kind
            if kind == ServerToWorker.BLS_RESULT:
                self._route_bls(message, frames)
            elif kind == ServerToWorker.CANCEL:
                if message.cancel_items:
                    self._gone_items.setdefault(message.id, set()).update(message.cancel_items)
                else:
                    self._cancelled.add(message.id)
                    self._gone_all.add(message.id)
            elif kind == ServerToWorker.CREDIT:
                credit = self.credit
                if credit is not None and credit.call_id == message.id:
                    credit.on_consumed(message.consumed)
            else:
                self._stop_seen = self._stop_seen or kind == ServerToWorker.STOP
                self._backlog.append((message, frames))
        if got:
            self._cond.notify_all()
            if self._reader is not None and self._reader != threading.get_ident():
                try:
                    os.write(self._wake_w, b"!")
                except BlockingIOError:  # (already woken)
                    pass

    def _await(self, ready: Callable[[], Any], timeout_ms: int) -> bool:
        """Wait until `ready()` (checked with the lock held) or `timeout_ms` passed; whether it is. Not to be called
        with the lock held: one waiting thread watches the socket without it, the others wait to be woken."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._cond:
            while True:
                self._drain()
                if ready():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                if self._reader is not None:
                    self._cond.wait(remaining)
                    continue
                self._reader = threading.get_ident()
                self._lock.release()
                try:
                    readable, _, _ = select.select([self._fd, self._wake_r], [], [], min(remaining, MAX_WAIT_S))
                    if self._wake_r in readable:
                        os.read(self._wake_r, 4096)
                finally:
                    self._lock.acquire()
                    self._reader = None
                    self._cond.notify_all()  # another waiter takes the watch

    def _read(self) -> tuple[Any, list[zmq.Frame]]:
        frames = recv_frames(self._socket)
        message = ServerToWorker.FromString(frames[0].bytes)
        for key in message.freed:
            self.arena.free_key(key)
        if message.unmap_regions:
            self.regions.unmap(list(message.unmap_regions))
        return message, frames[1:]

    def receive(self, timeout_ms: int) -> tuple[Any, list[zmq.Frame]] | None:
        """Wait for the next message (INFER, STOP, ...); apply the slot releases it carries. None on timeout."""
        backlog = self._backlog
        fresh = not backlog  # (then it comes from a drain that has just found the socket empty)
        if fresh and not self._await(lambda: backlog, timeout_ms):
            return None
        with self._lock:
            message, frames = backlog.popleft()
            self._stop_seen = self._stop_seen and message.kind != ServerToWorker.STOP
            self._fresh = fresh
            return message, frames

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

        def stop() -> bool:
            return credit.call_id in self._cancelled or self._stop_seen

        while credit.blocked:
            if stop() or not alive():
                return False
            self._await(lambda: not credit.blocked or stop(), poll_ms)
        return True

    def cancelled(self, call_id: int) -> bool:
        """Between two responses of a stream: has the server cancelled `call_id`? Other messages wait."""
        with self._lock:
            self._drain()
            if call_id not in self._cancelled:
                return False
            self._cancelled.discard(call_id)
            return True

    def starting(self, call_id: int) -> bool:
        """A call is about to start: False if the server cancelled it while it waited here (its client is gone).

        Calls reach the worker in the order of their ids, so a CANCEL noted for an earlier one came after that call
        had ended: it is forgotten now. Right after a `receive` whose drain emptied the socket, the socket is not read
        again (a CANCEL that comes now is as late as one that comes just after this check)."""
        with self._lock:
            if not self._fresh:
                self._drain()
            self._fresh = False
            self._gone_all = {i for i in self._gone_all if i >= call_id}
            for old in [i for i in self._gone_items if i < call_id]:
                del self._gone_items[old]
            if not self._cancelled:
                return True
            cancelled = self._cancelled
            self._cancelled = {i for i in cancelled if i > call_id}
            return call_id not in cancelled

    def request_cancelled(self, call_id: int, index: int) -> bool:
        """Whether the client of request `index` of call `call_id` left (any thread may ask)."""
        with self._lock:
            self._drain()
            return call_id in self._gone_all or index in self._gone_items.get(call_id, ())

    # ---- requests ----------------------------------------------------------------------------
    def _input_buffer(self, ref: Any, frames: Sequence[memoryview]) -> Any:
        """Where input `ref`'s bytes are: `frames` are the message's frames as read-only views."""
        if ref.frame:
            buffer = frames[ref.frame - 1]
            if ref.offset or ref.nbytes != len(buffer):  # one of the small inputs that share a frame
                return buffer[ref.offset:ref.offset + ref.nbytes]
            return buffer
        if ref.region:
            return self.regions.system_view(ref).toreadonly()
        return self.inputs.view(ref)

    def decode(
        self, message: Any, frames: Sequence[zmq.Frame]
    ) -> tuple[list[Request], list[dict[str, Any]] | None, list[str]]:
        with self._lock:
            return self._decode(message, frames)

    def _decode(
        self, message: Any, frames: Sequence[zmq.Frame]
    ) -> tuple[list[Request], list[dict[str, Any]] | None, list[str]]:
        """Turn an INFER message into the callable's requests, with numpy inputs (read-only views for fixed-size
        types); per request of the message, the client regions its outputs go to (None when no request has any);
        and per request of the message the error that answers it instead ("" for those that run: a request whose
        client region cannot be used, gone or shrunk, is left out and the others of the batch still run)."""
        decoded: list[Request] = []
        regions: list[dict[str, Any]] = []
        failed: list[str] = []
        views = [frame.buffer.toreadonly() for frame in frames]  # (once per frame: small inputs share one)
        for item in message.requests[:]:  # (a slice, `[:]`, is walked in half the time of protobuf's own iterator)
            flags = item.flags
            if flags & FLAG_NOT_READY:  # a not-ready row of a sequence batch: only its flags (backends/sequence_rows)
                regions.append({})
                failed.append("")
                decoded.append(Request({}, {}, None, item.requested_outputs[:] or None, "", 0, flags))
                continue
            regions.append({ref.name: ref for ref in item.output_regions[:]})
            try:
                inputs = self._decode_inputs(item, views)
            except RegionError as exc:
                failed.append(str(exc))
                continue
            failed.append("")
            parameters = params_from_proto(item.parameters) if item.parameters else {}
            request_id, correlation_id, flags = decode_request_fields(item, parameters)
            decoded.append(Request(inputs, parameters, None, item.requested_outputs[:] or None, request_id,
                                   correlation_id, flags))
        return decoded, (regions if any(regions) else None), failed

    def _decode_inputs(self, item: Any, frames: Sequence[memoryview]) -> dict[str, np.ndarray]:
        inputs: dict[str, np.ndarray] = {}
        for ref in item.inputs[:]:
            shape = tuple(ref.shape[:])
            dtype = ref.dtype
            frame = ref.frame
            if frame and dtype != _BYTES_CODE:  # (the common case: a read-only array over the frame, made in one step)
                buffer, offset, nbytes, numpy_dtype = frames[frame - 1], ref.offset, ref.nbytes, CODE_TO_NUMPY[dtype]
                if nbytes == numpy_dtype.itemsize * prod(shape) and offset + nbytes <= len(buffer):
                    inputs[ref.name] = np.ndarray(shape, numpy_dtype, buffer, offset)
                    continue
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
            write_cuda_region(self.regions, ref, region, array)
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
                raise OutputRegionError(too_small(name, region.nbytes, nbytes))
            target = self.regions.system_view(region)
            if datatype == "BYTES":
                target[:nbytes] = data
            elif nbytes:
                self.copier.copy(np.frombuffer(target, dtype=array.dtype, count=array.size).reshape(array.shape), array)
            ref.region = region.region
            ref.region_id = region.region_id
            ref.offset = region.offset
            ref.nbytes = nbytes
            return 0
        if nbytes <= self.inline_max or not self._hello_sent:  # (before HELLO the server cannot map our arena)
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
            self.copier.copy(np.frombuffer(view, dtype=array.dtype).reshape(array.shape), array)
        return nbytes

    def send_result(self, *args: Any, **kwargs: Any) -> int:
        """`_send_result` with the lock held (a model's threads may use the arena and the socket meanwhile)."""
        with self._lock:
            return self._send_result(*args, **kwargs)

    def _send_result(
        self,
        call_id: int,
        responses: list[tuple[list[tuple[str, str, np.ndarray]], str, dict[str, Any]] | None] | None,
        output_regions: list[dict[str, Any]] | None = None,
        error: str = "",
        timings: tuple[int, int] = (0, 0),
        output_started_ns: int = 0,
        final: bool = True,
        started_ns: int = 0,
        finals: Sequence[bool] | None = None,
    ) -> int:
        """Send the outputs of one execution: per request (outputs, error, parameters), or a batch error. A stream of
        several requests answers each on its own: None for a request this message brings nothing to, and `finals[i]`
        on request i's last message.

        `timings` are the input and infer durations; the output duration runs from `output_started_ns`
        until the outputs are in place; `started_ns` is when the execution began (perf_counter_ns, CLOCK_MONOTONIC on
        Linux: the server places trace timestamps with it). Returns the bytes of the outputs that the server now holds (frames and arena
        slots; not those written into client regions).
        """
        if self.before_result is not None:
            self.before_result()
        message = WorkerToServer(kind=WorkerToServer.RESULT, id=call_id, final=final or bool(error), error=error)
        message.compute_input_ns, message.compute_infer_ns = timings
        message.compute_start_ns = started_ns
        frames: list[Any] = []
        held = 0
        try:
            for index, response in enumerate(responses or ()):
                item = message.responses.add()
                if finals is not None and finals[index]:
                    item.final = True
                if response is None:
                    item.absent = True
                    continue
                if response is RESCHEDULED_RESPONSE:
                    item.rescheduled = item.final = True
                    continue
                outputs, item_error, parameters = response
                if item_error:
                    item.error = item_error
                    code = getattr(item_error, "code", None)  # (a model's TritonError: python_model.ModelError)
                    if code is not None:
                        item.error_code = code
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
        self._send([message.SerializeToString(), *frames])
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
        self.copier.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        self.regions.close()
        self._socket.close()
        self.inputs.close()
        self.arena.close()
