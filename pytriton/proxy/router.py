"""Server side of the worker transport: one ZMQ ROUTER socket, the request arena, one link per worker.

Runs on the server's event loop without zmq.asyncio: the socket's file descriptor is watched with
`loop.add_reader` and drained until empty (ZMQ signals edge-triggered), which costs fewer wake-ups.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from typing import Any, AsyncIterator, Callable

import zmq

from pytriton.model_config.datatypes import CODE_TO_TRITON, TRITON_TO_CODE
from pytriton.proxy.arena import ArenaExhaustedError, SegmentMap, ShmArena
from pytriton.proxy.messages import (
    ExecutionResult,
    RequestData,
    ResponseData,
    ServerToWorker,
    TensorData,
    WorkerToServer,
    params_from_proto,
    params_to_proto,
)

logger = logging.getLogger("pytriton.proxy")

DEFAULT_INLINE_MAX = 64 * 1024
FREE_FLUSH_THRESHOLD = 256


class WorkerGoneError(ConnectionError):
    """The worker of a link died or was removed while a request was in flight."""


class WorkerLink:
    """The server's view of one worker process: its identity, pid, response segments and pending calls."""

    def __init__(self, router: ProxyRouter, identity: bytes, label: str):
        self.router = router
        self.identity = identity
        self.label = label
        self.pid: int | None = None
        self.hello: asyncio.Future[int] = router.loop.create_future()
        # call id -> (future or queue of the caller, or None once abandoned; request-arena slots)
        self.pending: dict[int, tuple[Any, list[int]]] = {}
        self.pending_free: list[int] = []
        self.segments: SegmentMap | None = None
        self.closed = False

    def release(self, keys: list[int]) -> None:
        """Queue response-arena slots for release; they ride on the next request to the worker
        (which frees them before it allocates), or go alone once many have piled up."""
        if self.closed or not keys:
            return
        self.pending_free.extend(keys)
        if len(self.pending_free) >= FREE_FLUSH_THRESHOLD:
            self.router._send_free(self)


class ProxyRouter:
    """Owns the ROUTER socket and the request arena; executes request batches on workers."""

    def __init__(self, address: str, tag: str, inline_max: int = DEFAULT_INLINE_MAX):
        self.address = address
        self.tag = tag
        self.inline_max = inline_max
        self.loop = asyncio.get_running_loop()
        self.arena = ShmArena(tag, "req")
        self._ctx = zmq.Context.instance()
        self._socket = self._ctx.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.SNDHWM, 0)
        self._socket.setsockopt(zmq.RCVHWM, 0)
        self._socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._socket.setsockopt(zmq.ROUTER_HANDOVER, 1)
        self._socket.bind(address)
        self._fd = self._socket.getsockopt(zmq.FD)
        self.loop.add_reader(self._fd, self._drain)
        self._links: dict[bytes, WorkerLink] = {}
        self._ids = itertools.count(1)
        self._closed = False
        # Called with (identity, JSON text) for CONTROL messages from peers that are not workers.
        self.on_control: Callable[[bytes, str], None] | None = None

    # ---- links -------------------------------------------------------------------------------
    def add_link(self, identity: bytes, label: str) -> WorkerLink:
        link = WorkerLink(self, identity, label)
        self._links[identity] = link
        return link

    def drop_link(self, link: WorkerLink, reason: str) -> None:
        """Forget a worker: fail its in-flight calls with `reason` and free their request slots."""
        link.closed = True
        self._links.pop(link.identity, None)
        pending, link.pending = link.pending, {}
        for waiter, slots in pending.values():
            self._free_request_slots(slots)
            if isinstance(waiter, _Abandoned):
                waiter.callback(None)
            elif isinstance(waiter, asyncio.Queue):
                waiter.put_nowait(WorkerGoneError(reason))
            elif waiter is not None and not waiter.done():
                waiter.set_exception(WorkerGoneError(reason))
        if not link.hello.done():
            link.hello.set_exception(WorkerGoneError(reason))
            link.hello.exception()  # mark retrieved; the supervisor reports the failure itself
        if link.segments is not None:
            link.segments.close()
        link.pending_free.clear()

    # ---- sending -----------------------------------------------------------------------------
    def _send(self, link: WorkerLink, frames: list[Any]) -> None:
        try:
            self._socket.send_multipart([link.identity, *frames], copy=False)
        except zmq.ZMQError as exc:
            raise WorkerGoneError(f"model instance '{link.label}' is not connected ({exc})") from exc
        finally:
            # A send can consume the edge that announces pending input: check for it now.
            if self._socket.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                self.loop.call_soon(self._drain)

    def _send_free(self, link: WorkerLink) -> None:
        message = ServerToWorker(kind=ServerToWorker.FREE)
        message.freed.extend(link.pending_free)
        link.pending_free.clear()
        try:
            self._send(link, [message.SerializeToString()])
        except WorkerGoneError:
            pass

    def broadcast_unmap(self, region_ids: list[int]) -> None:
        """Tell every worker to drop its mappings of these client regions (after they were unregistered)."""
        message = ServerToWorker(kind=ServerToWorker.UNMAP)
        message.unmap_regions.extend(region_ids)
        data = message.SerializeToString()
        for link in list(self._links.values()):
            if link.pid is not None and not link.closed:
                try:
                    self._send(link, [data])
                except WorkerGoneError:
                    pass

    def reply_control(self, identity: bytes, payload: str) -> None:
        """Answer a control client."""
        message = ServerToWorker(kind=ServerToWorker.CONTROL, control=payload)
        try:
            self._socket.send_multipart([identity, message.SerializeToString()])
        except zmq.ZMQError:
            logger.warning("control client went away before its answer")

    def stop_worker(self, link: WorkerLink) -> None:
        """Ask a worker to finish and exit."""
        try:
            self._send(link, [ServerToWorker(kind=ServerToWorker.STOP).SerializeToString()])
        except WorkerGoneError:
            pass

    def _free_request_slots(self, slots: list[int]) -> None:
        for key in slots:
            self.arena.free_key(key)

    def _encode_tensor(self, tensor: TensorData, ref: Any, frames: list[Any], slots: list[int]) -> None:
        ref.name = tensor.name
        if tensor.datatype:  # output regions carry no datatype
            ref.dtype = TRITON_TO_CODE[tensor.datatype]
        ref.shape.extend(tensor.shape)
        if tensor.region or tensor.cuda_handle:
            ref.region = tensor.region
            ref.region_size = tensor.region_size
            ref.region_id = tensor.region_id
            ref.offset = tensor.offset
            ref.nbytes = tensor.nbytes
            if tensor.cuda_handle:
                ref.cuda_handle = tensor.cuda_handle
                ref.cuda_device = tensor.cuda_device
            return
        data = tensor.data
        nbytes = data.nbytes if isinstance(data, memoryview) else len(data)
        ref.nbytes = nbytes
        if nbytes <= self.inline_max:
            frames.append(data)
            ref.frame = len(frames)
            return
        segment_id, offset, view = self.arena.allocate(nbytes)
        slots.append(self.arena.key(segment_id, offset))
        view[:] = memoryview(data).cast("B")
        ref.segment = segment_id
        ref.offset = offset

    def _submit(self, link: WorkerLink, requests: list[RequestData], waiter: Any) -> int:
        """Encode and send one execution; `waiter` (a future or a queue) gets the worker's answer(s)."""
        if link.closed:
            raise WorkerGoneError(f"model instance '{link.label}' is not running")
        call_id = next(self._ids)
        message = ServerToWorker(kind=ServerToWorker.INFER, id=call_id)
        frames: list[Any] = []
        slots: list[int] = []
        try:
            for request in requests:
                item = message.requests.add()
                for tensor in request.inputs:
                    self._encode_tensor(tensor, item.inputs.add(), frames, slots)
                item.requested_outputs.extend(request.requested_outputs)
                for region in request.output_regions:
                    self._encode_tensor(region, item.output_regions.add(), frames, slots)
                if request.parameters:
                    params_to_proto(request.parameters, item.parameters)
        except ArenaExhaustedError:
            self._free_request_slots(slots)
            raise
        if link.pending_free:
            message.freed.extend(link.pending_free)
            link.pending_free.clear()
        link.pending[call_id] = (waiter, slots)
        try:
            self._send(link, [message.SerializeToString(), *frames])
        except WorkerGoneError:
            link.pending.pop(call_id, None)
            self._free_request_slots(slots)
            raise
        return call_id

    def submit(self, link: WorkerLink, requests: list[RequestData]) -> asyncio.Future:
        """Send a batch to a worker; the future gets (reply, frames) for `decode`, or WorkerGoneError."""
        return self.submit_call(link, requests)[1]

    def submit_call(self, link: WorkerLink, requests: list[RequestData]) -> tuple[int, asyncio.Future]:
        """`submit`, also returning the call id (for `abandon`)."""
        future: asyncio.Future = self.loop.create_future()
        return self._submit(link, requests, future), future

    def abandon(self, link: WorkerLink, call_id: int, callback: Callable[[Any], None]) -> None:
        """Nobody awaits call `call_id` any more: when the worker answers, its response buffers are freed and
        `callback(reply)` runs (with None if the worker is gone first)."""
        entry = link.pending.get(call_id)
        if entry is not None:
            link.pending[call_id] = (_Abandoned(callback), entry[1])

    def decode(self, link: WorkerLink, reply: Any, frames: list[zmq.Frame]) -> ExecutionResult:
        return self._decode_result(link, reply, frames)

    def discard(self, link: WorkerLink, reply: Any) -> None:
        """Nobody wants this answer any more: give its response-arena slots back."""
        link.release(_response_slots(reply))

    async def execute(self, link: WorkerLink, requests: list[RequestData]) -> ExecutionResult:
        """Send a batch of requests to a worker and wait for its result."""
        reply, reply_frames = await self.submit(link, requests)  # if the caller gives up, the answer is dropped
        return self._decode_result(link, reply, reply_frames)

    async def execute_stream(self, link: WorkerLink, requests: list[RequestData]) -> AsyncIterator[ExecutionResult]:
        """Like `execute` for decoupled models: yields each result the worker sends until the final one."""
        queue: asyncio.Queue = asyncio.Queue()
        call_id = self._submit(link, requests, queue)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                reply, reply_frames = item
                result = self._decode_result(link, reply, reply_frames)
                if reply.responses or reply.error:
                    yield result
                else:
                    result.release_buffers()
                if reply.final:
                    return
        finally:
            if call_id in link.pending:  # abandoned early: drop what still comes and stop the callable
                link.pending[call_id] = (None, link.pending[call_id][1])
                try:
                    self._send(link, [ServerToWorker(kind=ServerToWorker.CANCEL, id=call_id).SerializeToString()])
                except WorkerGoneError:
                    pass

    # ---- receiving ---------------------------------------------------------------------------
    def _drain(self) -> None:
        socket = self._socket
        while not self._closed:
            try:
                frames = socket.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            except zmq.ZMQError:
                if self._closed:
                    return
                raise
            try:
                self._dispatch(frames)
            except Exception:  # a bad message must not stop the loop
                logger.exception("dropping malformed message from a worker")

    def _dispatch(self, frames: list[zmq.Frame]) -> None:
        identity = frames[0].bytes
        link = self._links.get(identity)
        if link is None:
            message = WorkerToServer.FromString(frames[1].bytes)
            if message.kind == WorkerToServer.CONTROL and self.on_control is not None:
                self.on_control(identity, message.control)
            return
        message = WorkerToServer.FromString(frames[1].bytes)
        if message.kind == WorkerToServer.RESULT:
            entry = link.pending.get(message.id)
            if entry is None:
                # Nobody waits (cancelled): free what the worker allocated for it.
                link.release(_response_slots(message))
                return
            waiter, slots = entry
            if message.final:
                del link.pending[message.id]
                self._free_request_slots(slots)
            if isinstance(waiter, _Abandoned):
                self.discard(link, message)
                waiter.callback(message)
            elif isinstance(waiter, asyncio.Queue):
                waiter.put_nowait((message, frames[2:]))
            elif waiter is not None and not waiter.done():
                waiter.set_result((message, frames[2:]))
            else:
                link.release(_response_slots(message))
        elif message.kind == WorkerToServer.HELLO:
            link.pid = message.pid
            link.segments = SegmentMap(self.tag, message.pid, message.arena or "rsp")
            if not link.hello.done():
                link.hello.set_result(message.pid)
        elif message.kind == WorkerToServer.FATAL:
            if not link.hello.done():
                link.hello.set_exception(WorkerGoneError(message.error))

    def _decode_result(self, link: WorkerLink, message: Any, frames: list[zmq.Frame]) -> ExecutionResult:
        responses: list[ResponseData] = []
        slots: list[int] = []
        segments = link.segments
        for item in message.responses:
            outputs = []
            for ref in item.outputs:
                datatype = CODE_TO_TRITON[ref.dtype]
                if ref.region or ref.cuda_handle:  # written into the client's region by the worker
                    outputs.append(
                        TensorData(ref.name, datatype, tuple(ref.shape), None, ref.region, 0, ref.offset, ref.nbytes,
                                   ref.region_id)
                    )
                    continue
                if ref.frame:
                    data: Any = frames[ref.frame - 1].buffer
                else:
                    assert segments is not None
                    data = segments.view(ref.segment, ref.offset, ref.nbytes)
                    slots.append((ref.segment << 40) | ref.offset)
                outputs.append(TensorData(ref.name, datatype, tuple(ref.shape), data))
            responses.append(ResponseData(outputs, item.error, params_from_proto(item.parameters)))
        result = ExecutionResult(
            responses=responses,
            error=message.error,
            compute_input_ns=message.compute_input_ns,
            compute_infer_ns=message.compute_infer_ns,
            compute_output_ns=message.compute_output_ns,
        )
        if slots:

            def release() -> None:
                if segments is not None:
                    for key in slots:
                        segments.release_dedicated(key >> 40)
                link.release(slots)

            result.release = release
        return result

    # ---- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for link in list(self._links.values()):
            self.drop_link(link, "server is shutting down")
        try:
            self.loop.remove_reader(self._fd)
        except Exception:  # loop already closed
            pass
        self._socket.close(linger=0)
        self.arena.close()
        if self.address.startswith("ipc://"):
            try:
                os.unlink(self.address[len("ipc://") :])
            except FileNotFoundError:
                pass


class _Abandoned:
    """Stands in for the waiter of a call nobody awaits any more."""

    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[Any], None]):
        self.callback = callback


def _response_slots(message: Any) -> list[int]:
    return [
        (ref.segment << 40) | ref.offset
        for item in message.responses
        for ref in item.outputs
        if not ref.frame and not ref.region and not ref.cuda_handle
    ]
