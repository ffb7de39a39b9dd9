"""The BLS half of the worker's endpoint: a model's own inference requests to the server, from any of its threads."""

from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import zmq

from pytriton.model_config.datatypes import CODE_TO_NUMPY, TRITON_TO_CODE, deserialize_bytes_tensor
from pytriton.proxy.arena import SegmentMap, ShmArena, is_dedicated, slot_key
from pytriton.proxy.messages import (
    RequestData,
    WorkerToServer,
    encode_chain,
    encode_request_fields,
    params_from_proto,
    params_to_proto,
)

_BYTES_CODE = TRITON_TO_CODE["BYTES"]


class BlsEndpoint:
    """Mixed into `WorkerEndpoint`, whose lock, socket and arenas it uses."""

    _lock: threading.RLock
    _socket: zmq.Socket[bytes]
    _fd: int
    arena: ShmArena
    request_segments: SegmentMap
    _bls_ids: itertools.count[int]
    _bls_replies: dict[int, collections.deque[tuple[Any, list[zmq.Frame]]]]

    def _send(self, frames: list[Any]) -> None:
        raise NotImplementedError

    def _await(self, ready: Callable[[], Any], timeout_ms: int) -> bool:
        raise NotImplementedError

    def _encode_output(self, ref: Any, name: str, datatype: str, array: Any, frames: list[Any],
                       region: Any = None) -> int:
        raise NotImplementedError

    # ---- BLS: this worker's own requests to the server (from any thread) ------------------------
    def bls_send(self, model_name: str, model_version: str, inputs: list[tuple[str, str, Any]],
                 requested_outputs: list[str], parameters: dict[str, Any], decoupled: bool,
                 fields: tuple[str, int | str, int] = ("", 0, 0), timeout_us: int = 0,
                 chain: tuple[tuple[str, int, str], ...] = ()) -> int:
        """Send a model's own inference request upstream; its inputs go as frames or through this worker's response
        arena (the server gives those slots back when the request ends). `fields` are its request id, correlation id
        and flags; `chain` its call chain (model, version, instance), outermost first. Returns the call id for
        `bls_poll`."""
        with self._lock:
            call_id = next(self._bls_ids)
            message = WorkerToServer(kind=WorkerToServer.BLS, id=call_id, model_name=model_name,
                                     model_version=model_version, decoupled=decoupled, timeout_us=timeout_us)
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
            encode_request_fields(RequestData([], [], {}, [], *fields), request)
            encode_chain(chain, request)
            self._bls_replies[call_id] = collections.deque()
            self._send([message.SerializeToString(), *frames])
            return call_id

    def send_upstream(self, message: Any, reply: bool = False) -> None:
        """Send a message a worker-side feature made (custom metrics); with `reply`, `message.id` is set and the
        answer (a BLS_RESULT) comes to `bls_poll` under that id."""
        with self._lock:
            if reply:
                message.id = next(self._bls_ids)
                self._bls_replies[message.id] = collections.deque()
            self._send([message.SerializeToString()])

    def fileno(self) -> int:
        """The socket's file descriptor: readable (edge-triggered, as ZMQ signals) when messages may be waiting."""
        return self._fd

    def bls_poll(self, call_id: int, timeout_ms: int) -> tuple[Any, list[zmq.Frame]] | None:
        """The next answer of BLS call `call_id`, waiting at most `timeout_ms` for one; None if none came. Other
        messages wait in the backlog (or are noted, as between two responses of a stream)."""
        with self._lock:
            replies = self._bls_replies[call_id]
        if not self._await(lambda: replies, timeout_ms):
            return None
        with self._lock:
            message, frames = replies.popleft()
            if message.final:
                del self._bls_replies[call_id]
            return message, frames

    def bls_read(self, message: Any, frames: Sequence[zmq.Frame]) -> tuple[list[tuple[str, np.ndarray]],
                                                                          dict[str, Any]]:
        """The outputs of one BLS answer as arrays of their own (copied out of shared memory, whose slots go back to
        the server at once), and its parameters."""
        outputs: list[tuple[str, np.ndarray]] = []
        with self._lock:
            try:
                for item in message.responses:
                    for ref in item.outputs:
                        shape = tuple(ref.shape)
                        if ref.frame:
                            buffer: Any = frames[ref.frame - 1].buffer
                        else:
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

    def bls_abandon(self, call_id: int, tell: bool = False) -> None:
        """Nobody waits for BLS call `call_id` any more: what came for it and what still comes is given back; with
        `tell`, the server withdraws the request (e.g. its timeout passed)."""
        with self._lock:
            replies = self._bls_replies.pop(call_id, None)
            for message, _ in replies or ():
                self._bls_free(message)
            if tell and replies is not None:
                self._send([WorkerToServer(kind=WorkerToServer.BLS_CANCEL, id=call_id).SerializeToString()])

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
            self._socket.send(free.SerializeToString())  # (lock held; whoever holds it drains after)
