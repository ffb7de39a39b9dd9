"""Server side of the worker transport: one ZMQ ROUTER socket, the request arena, one link per worker.

Runs on the server's event loop without zmq.asyncio: the socket's file descriptor is watched with
`loop.add_reader` and drained until empty (ZMQ signals edge-triggered), which costs fewer wake-ups.

Every call sent to a worker has one `Call` that hears of it: each RESULT message (`on_reply`), or that the
worker went away first (`on_gone`); the request-arena slots of a call are freed exactly once, with its final
reply or when its worker is dropped. Response-arena slots are the receiver's to give back (`WorkerLink.release`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
from typing import Any, Callable, Protocol, cast

import zmq

from pytriton.config.env import DEFAULT_INLINE_MAX
from pytriton.model_config.datatypes import TRITON_TO_CODE
from pytriton.proxy._zmq import NOBLOCK, readable, recv_frames, send_frames
from pytriton.proxy.arena import ArenaExhaustedError, SegmentMap, SharedMemoryFullError, ShmArena, slot_key
from pytriton.proxy.infer_wire import infer_message, inline_item
from pytriton.proxy.messages import (
    RequestData,
    RequestItem,
    ServerToWorker,
    TensorData,
    WorkerToServer,
    encode_chain,
    encode_request_fields,
    params_to_proto,
)

logger = logging.getLogger("pytriton.proxy")

FREE_FLUSH_THRESHOLD = 256
DRAIN_BATCH = 256
# An INFER message's inputs of at most this many bytes share one frame (at 8-byte aligned offsets): a batch of
# many small requests (a sequence batch's control tensors) would otherwise cost a frame each to send and receive.
PACK_MAX = 1024


class WorkerGoneError(ConnectionError):
    """The worker of a link died or was removed while a request was in flight."""


class Call(Protocol):
    """Hears what becomes of one call sent to a worker."""

    def on_reply(self, message: Any, frames: list[zmq.Frame]) -> None:
        """A RESULT for the call (the last one has `message.final` set)."""

    def on_gone(self, reason: str) -> None:
        """The worker went away before the final RESULT."""


def warmup_executions(control: str) -> tuple[tuple[int, int], ...]:
    """The warm-up executions a HELLO reports (JSON in its control field); none when it holds none or is malformed."""
    if not control:
        return ()
    try:
        return tuple((int(n), int(ns)) for n, ns in json.loads(control).get("warmup") or ())
    except (ValueError, TypeError, AttributeError):
        return ()


class WorkerLink:
    """The server's view of one worker process: its identity, pid, response segments and pending calls."""

    def __init__(self, router: ProxyRouter, identity: bytes, label: str):
        self.router = router
        self.identity = identity
        self.label = label
        self.pid: int | None = None
        self.hello: asyncio.Future[int] = router.loop.create_future()
        self.pending: dict[int, tuple[Call, list[int]]] = {}  # call id -> (who hears of it, request-arena slots)
        self.pending_free: list[int] = []
        self.segments: SegmentMap | None = None
        self.closed = False
        self.unreachable = False  # a send found no peer behind the identity: the worker's socket is gone
        # Called with the reason when the worker says (FATAL after HELLO) that it stopped serving; its source
        # takes the instance out of service and drops the link. Without one, the link is dropped at once.
        self.on_fatal: Callable[[str], None] | None = None
        self.bls_slots: set[int] = set()  # request-arena slots of BLS answers the worker has not given back yet
        self.warmup: tuple[tuple[int, int], ...] = ()  # the warm-up executions its HELLO reported: (requests, ns)

    def release(self, keys: list[int], now: bool = False) -> None:
        """Queue response-arena slots for release; they ride on the next request to the worker
        (which frees them before it allocates), or go alone once many have piled up, or at once with `now`
        (a dedicated segment: an idle worker would otherwise keep a large tensor's memory until its next request)."""
        if self.closed or not keys:
            return
        self.pending_free.extend(keys)
        if now or len(self.pending_free) >= FREE_FLUSH_THRESHOLD:
            self.router._send_free(self)


class ProxyRouter:
    """Owns the ROUTER socket and the request arena; sends calls to workers and routes their answers."""

    def __init__(self, address: str, tag: str, inline_max: int = DEFAULT_INLINE_MAX):
        self.address = address
        self.tag = tag
        self.inline_max = inline_max
        self.loop = asyncio.get_running_loop()
        self.arena = ShmArena(tag, "req")
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self._socket = self._ctx.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.SNDHWM, 0)
        self._socket.setsockopt(zmq.RCVHWM, 0)
        self._socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._socket.setsockopt(zmq.ROUTER_HANDOVER, 1)
        self._socket.bind(address)
        self._fd = cast(int, self._socket.getsockopt(zmq.FD))
        self.loop.add_reader(self._fd, self._drain, True)  # (the descriptor mostly signals a message: see _drain)
        self._links: dict[bytes, WorkerLink] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self._draining = False  # _drain is on the stack (it checks the socket after each message it handles)
        # Called with (identity, JSON text) for CONTROL messages from peers that are not workers.
        self.on_control: Callable[[bytes, str], None] | None = None
        # Called with (link, message, frames) for a worker's BLS request; hears first of a link being dropped.
        self.on_bls: Callable[[WorkerLink, Any, list[zmq.Frame]], None] | None = None
        self.on_link_dropped: Callable[[WorkerLink], None] | None = None
        self.on_bls_cancel: Callable[[WorkerLink, int], None] | None = None  # the worker gave up a BLS request
        # Called with (link, message) for a worker's custom-metrics operations (METRICS); unset: they are dropped.
        self.on_metrics: Callable[[WorkerLink, Any], None] | None = None
        # Called with (link, message) for a model's call of the model loading API (MODEL_LOADING); unset: refused.
        self.on_model_loading: Callable[[WorkerLink, Any], None] | None = None

    # ---- links -------------------------------------------------------------------------------
    def add_link(self, identity: bytes, label: str) -> WorkerLink:
        link = WorkerLink(self, identity, label)
        self._links[identity] = link
        return link

    def drop_link(self, link: WorkerLink, reason: str) -> None:
        """Forget a worker: its pending calls hear `reason`, their request slots are freed (once: a dropped link
        stays dropped)."""
        if link.closed:
            return
        link.closed = True
        self._links.pop(link.identity, None)
        if self.on_link_dropped is not None:
            self.on_link_dropped(link)
        self._free_request_slots(list(link.bls_slots))
        link.bls_slots.clear()
        pending, link.pending = link.pending, {}
        for call, slots in pending.values():
            self._free_request_slots(slots)
            try:
                call.on_gone(reason)
            except Exception:  # noqa: BLE001 - one caller's bug must not keep the others from hearing
                logger.exception("failing a call of model instance '%s'", link.label)
        if not link.hello.done():
            link.hello.set_exception(WorkerGoneError(reason))
            link.hello.exception()  # mark retrieved; the supervisor reports the failure itself
        if link.segments is not None:
            link.segments.close()
        link.pending_free.clear()

    # ---- sending -----------------------------------------------------------------------------
    def _send(self, link: WorkerLink, frames: list[Any]) -> None:
        socket = self._socket
        try:
            send_frames(socket, (link.identity, *frames))
        except zmq.ZMQError as exc:
            if exc.errno == zmq.EHOSTUNREACH:
                link.unreachable = True
            raise WorkerGoneError(f"model instance '{link.label}' is not connected ({exc})") from exc
        finally:
            # A send can consume the edge that announces pending input: check for it now (the drain then knows that
            # a message waits and reads it without checking again), unless a drain runs now: it checks next anyway.
            if not self._draining and readable(socket):
                self.loop.call_soon(self._drain, True)

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

    def cancel(self, link: WorkerLink, call_id: int, items: list[int] | None = None) -> None:
        """Tell the worker that the clients of call `call_id` left (of the requests at `items` only, when given): a
        streaming call stops early once all have (it still sends a final RESULT); the model's `is_cancelled()` says
        so."""
        if call_id in link.pending and not link.closed:
            message = ServerToWorker(kind=ServerToWorker.CANCEL, id=call_id)
            if items:
                message.cancel_items.extend(items)
            try:
                self._send(link, [message.SerializeToString()])
            except WorkerGoneError:
                pass

    def credit(self, link: WorkerLink, call_id: int, consumed: int) -> None:
        """Tell the worker that the consumers of streaming call `call_id` have taken `consumed` of its responses."""
        if call_id in link.pending and not link.closed:
            message = ServerToWorker(kind=ServerToWorker.CREDIT, id=call_id, consumed=consumed)
            try:
                self._send(link, [message.SerializeToString()])
            except WorkerGoneError:
                pass

    def _free_request_slots(self, slots: list[int]) -> None:
        for key in slots:
            self.arena.free_key(key)

    def fill_item(self, request: RequestData, item: Any, frames: list[Any], slots: list[int], pack: list[Any]) -> None:
        """`request` into the protobuf RequestItem `item` (the path of every request `inline_item` does not write)."""
        for tensor in request.inputs:
            self._encode_tensor(tensor, item.inputs.add(), frames, slots, pack)
        item.requested_outputs.extend(request.requested_outputs)
        for region in request.output_regions:
            self._encode_tensor(region, item.output_regions.add(), frames, slots)
        if request.parameters:
            params_to_proto(request.parameters, item.parameters)
        encode_request_fields(request, item)
        if request.chain:
            encode_chain(request.chain, item)

    def _encode_tensor(self, tensor: TensorData, ref: Any, frames: list[Any], slots: list[int],
                       pack: list[Any] | None = None) -> None:
        """`tensor` into `ref`; with `pack` ([frame number, parts, size]: the shared frame of small inputs, filled
        in by the caller) a small inline tensor goes there at `ref.offset`."""
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
        slot = tensor.slot
        if slot is not None:  # in a worker's response arena: the receiver maps it there (no copy)
            ref.peer_pid, ref.peer_arena, ref.segment, ref.offset = slot.owner_pid, slot.kind, slot.segment, slot.offset
            return
        if pack is not None and nbytes <= PACK_MAX and nbytes <= self.inline_max:
            if not pack[0]:
                frames.append(b"")
                pack[0] = len(frames)
            parts, offset = pack[1], pack[2]
            parts.append(data)
            pad = -nbytes % 8
            if pad:
                parts.append(bytes(pad))
            pack[2] = offset + nbytes + pad
            ref.frame = pack[0]
            ref.offset = offset
            return
        if nbytes <= self.inline_max:
            frames.append(data)
            ref.frame = len(frames)
            return
        try:
            segment_id, offset, view = self.arena.allocate(nbytes)
        except SharedMemoryFullError as exc:
            raise SharedMemoryFullError(f"input '{tensor.name}': {exc}") from None
        slots.append(slot_key(segment_id, offset))
        view[:] = memoryview(data).cast("B")
        ref.segment = segment_id
        ref.offset = offset

    def submit(self, link: WorkerLink, requests: list[RequestData], call: Call, window: tuple[int, int] = (0, 0)
               ) -> int:  # fmt: skip
        """Encode and send one execution; `call` hears of its answers. Returns the call id. A streaming call's
        `window` (responses, bytes) bounds how far the worker may run ahead of the credit it is given (`credit`).

        Raises WorkerGoneError or ArenaExhaustedError if it could not be sent (then `call` hears nothing)."""
        if link.closed:
            raise WorkerGoneError(f"model instance '{link.label}' is not running")
        call_id = next(self._ids)
        frames: list[Any] = []
        slots: list[int] = []
        pack: list[Any] = [0, [], 0]
        items: list[bytes] = []
        pack_max = min(PACK_MAX, self.inline_max)
        try:
            for request in requests:
                item_bytes = inline_item(request, frames, pack, pack_max, self.inline_max)
                if item_bytes is None:  # (not the common kind: through protobuf)
                    item = RequestItem()
                    self.fill_item(request, item, frames, slots, pack)
                    item_bytes = item.SerializeToString()
                items.append(item_bytes)
        except ArenaExhaustedError:
            self._free_request_slots(slots)
            raise
        if pack[0]:
            frames[pack[0] - 1] = b"".join(pack[1])
        tail = b""  # the message's fields after `requests`
        if link.pending_free or window[0]:
            later = ServerToWorker()
            if link.pending_free:
                later.freed.extend(link.pending_free)
                link.pending_free.clear()
            if window[0]:
                later.window, later.window_bytes = window
            tail = later.SerializeToString()
        link.pending[call_id] = (call, slots)
        try:
            self._send(link, [infer_message(call_id, items, tail), *frames])
        except WorkerGoneError:
            link.pending.pop(call_id, None)
            self._free_request_slots(slots)
            raise
        return call_id

    def send_bls_result(self, link: WorkerLink, call_id: int, outputs: list[TensorData] | None = None,
                        parameters: dict[str, Any] | None = None, error: str = "", error_code: int = 0,
                        final: bool = True) -> None:
        """Answer a worker's BLS request `call_id`: outputs (large ones through the request arena, lent to the worker
        until it sends them back in a FREE), or an error. A worker that is gone hears nothing; nothing stays lent."""
        if link.closed:
            return
        message = ServerToWorker(kind=ServerToWorker.BLS_RESULT, id=call_id, final=final, error=error,
                                 error_code=error_code)
        frames: list[Any] = []
        slots: list[int] = []
        try:
            if outputs is not None:
                item = message.responses.add()
                for tensor in outputs:
                    self._encode_tensor(tensor, item.outputs.add(), frames, slots)
                if parameters:
                    params_to_proto(parameters, item.parameters)
        except ArenaExhaustedError as exc:
            self._free_request_slots(slots)
            message = ServerToWorker(kind=ServerToWorker.BLS_RESULT, id=call_id, final=True, error=str(exc),
                                     error_code=1)
            frames, slots = [], []
        if link.pending_free:
            message.freed.extend(link.pending_free)
            link.pending_free.clear()
        link.bls_slots.update(slots)
        try:
            self._send(link, [message.SerializeToString(), *frames])
        except WorkerGoneError:
            link.bls_slots.difference_update(slots)
            self._free_request_slots(slots)

    def send_metrics_answer(self, link: WorkerLink, call_id: int, value: float = 0.0, error: str = "") -> None:
        """Answer a worker's METRICS message `call_id` (as a final BLS_RESULT): a value, or why its last op failed."""
        if link.closed:
            return
        message = ServerToWorker(kind=ServerToWorker.BLS_RESULT, id=call_id, final=True, error=error,
                                 metric_value=value)
        try:
            self._send(link, [message.SerializeToString()])
        except WorkerGoneError:
            pass

    def send_model_loading_answer(self, link: WorkerLink, call_id: int, ready: bool = False, error: str = "",
                                  error_code: int = 0) -> None:
        """Answer a worker's MODEL_LOADING message `call_id` (as a final BLS_RESULT): readiness, or an error."""
        if link.closed:
            return
        message = ServerToWorker(kind=ServerToWorker.BLS_RESULT, id=call_id, final=True, error=error,
                                 error_code=error_code, model_ready=ready)
        try:
            self._send(link, [message.SerializeToString()])
        except WorkerGoneError:
            pass

    # ---- receiving ---------------------------------------------------------------------------
    def _drain(self, waiting: bool = False) -> None:
        """Handle what the workers sent, at most DRAIN_BATCH messages per turn of the loop: a worker that sends as
        fast as it is read (a streaming model) must not keep the loop from everything else. `waiting`: a message
        most likely waits (a check after a send found one, or the socket's descriptor signalled, which it mostly does
        for a message): the first receive goes without a check (it takes the socket's pending commands itself; when
        nothing waits after all, it ends in a zmq.Again, which costs a little more than the check)."""
        self._draining = True
        try:
            self._drain_batch(waiting)
        finally:
            self._draining = False

    def _drain_batch(self, waiting: bool) -> None:
        socket = self._socket
        for _ in range(DRAIN_BATCH):
            if waiting:
                waiting = False
                if self._closed:
                    return
            elif self._closed or not readable(socket):  # (checked first: a zmq.Again costs more than the check)
                return
            try:
                frames = recv_frames(socket, NOBLOCK)
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
        self.loop.call_soon(self._drain)  # more may wait: after whatever else is ready

    def _dispatch(self, frames: list[zmq.Frame]) -> None:
        identity = frames[0].bytes
        link = self._links.get(identity)
        message = WorkerToServer.FromString(frames[1].bytes)
        if link is None:
            if message.kind == WorkerToServer.CONTROL and self.on_control is not None:
                self.on_control(identity, message.control)
            return
        if message.kind == WorkerToServer.RESULT:
            entry = link.pending.get(message.id)
            if entry is None:  # not ours (any more): give back what the worker allocated for it
                link.release(response_slots(message))
                return
            call, slots = entry
            if message.final:
                del link.pending[message.id]
                self._free_request_slots(slots)
            call.on_reply(message, frames[2:])
        elif message.kind == WorkerToServer.BLS:
            if self.on_bls is not None:
                self.on_bls(link, message, frames[2:])
            else:
                self.send_bls_result(link, message.id, error="BLS requests are not served here", error_code=5)
        elif message.kind == WorkerToServer.BLS_CANCEL:
            if self.on_bls_cancel is not None:
                self.on_bls_cancel(link, message.id)
        elif message.kind == WorkerToServer.FREE:
            for key in message.freed:
                if key in link.bls_slots:  # (only what was lent to this worker, once)
                    link.bls_slots.discard(key)
                    self.arena.free_key(key)
        elif message.kind == WorkerToServer.METRICS:
            if self.on_metrics is not None:
                self.on_metrics(link, message)
            elif message.id:
                self.send_metrics_answer(link, message.id, error="custom metrics are not served here")
        elif message.kind == WorkerToServer.MODEL_LOADING:
            if self.on_model_loading is not None:
                self.on_model_loading(link, message)
            else:
                self.send_model_loading_answer(link, message.id, error="the model loading API is not served here",
                                               error_code=5)
        elif message.kind == WorkerToServer.HELLO:
            link.pid = message.pid
            link.segments = SegmentMap(self.tag, message.pid, message.arena or "rsp")
            link.warmup = warmup_executions(message.control)
            if not link.hello.done():
                link.hello.set_result(message.pid)
        elif message.kind == WorkerToServer.FATAL:
            if not link.hello.done():
                link.hello.set_exception(WorkerGoneError(message.error))
            elif link.on_fatal is not None:
                link.on_fatal(message.error)
            else:
                self.drop_link(link, message.error)

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


def response_slots(message: Any) -> list[int]:
    """Response-arena slot keys of every output a RESULT message placed in the worker's arena."""
    return [
        slot_key(ref.segment, ref.offset)
        for item in message.responses
        for ref in item.outputs
        if not ref.frame and not ref.region and not ref.cuda_handle
    ]
