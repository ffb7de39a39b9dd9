"""BLS requests of workers (a Python-backend model calling another model): the translator between a worker's BLS
message and the core's `InferRequest`, run through the same core path as a network request.

Inputs are read in place from the calling worker's response arena (its slots go back when the request ends);
outputs go back through the request arena (the worker returns those slots with a FREE). A caller worker that goes
away cancels its requests; a server that stops answers them with an error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import zmq

from pytriton.core.types import InferRequest, InferResponse, RequestedOutput, Tensor
from pytriton.exceptions import ServerError, Status
from pytriton.model_config.datatypes import CODE_TO_TRITON
from pytriton.proxy.arena import slot_key
from pytriton.proxy.messages import ArenaSlot, TensorData, decode_chain, decode_request_fields, params_from_proto
from pytriton.proxy.router import ProxyRouter, WorkerLink

logger = logging.getLogger("pytriton.supervisor")

_CODES = list(Status)  # in the order of pb_utils.TritonError's codes
UNKNOWN_MODEL = "Request for unknown model: "  # how the registry's NOT_FOUND begins (core/registry.py)


class BlsBridge:
    """Serves the BLS requests of every worker of a router with the core's `infer` / `infer_stream`."""

    def __init__(self, router: ProxyRouter, infer: Callable[[InferRequest], Awaitable[InferResponse]],
                 infer_stream: Callable[..., AsyncIterator[InferResponse]]):
        self.router = router
        self.infer = infer
        self.infer_stream = infer_stream
        self._tasks: dict[WorkerLink, dict[int, asyncio.Task[None]]] = {}  # link -> BLS call id -> its task
        router.on_bls = self._on_bls
        router.on_link_dropped = self._on_dropped
        router.on_bls_cancel = self._on_cancel

    def _on_bls(self, link: WorkerLink, message: Any, frames: list[zmq.Frame]) -> None:
        slots: list[int] = []
        try:
            request = self._request(link, message, frames, slots)
        except Exception as exc:  # noqa: BLE001 - a request that cannot be read is answered, not dropped
            link.release(slots)
            self.router.send_bls_result(link, message.id, error=f"cannot read the BLS request: {exc}", error_code=1)
            return
        timeout_s = message.timeout_us / 1e6 if message.timeout_us else None
        call_id = message.id
        task = asyncio.get_running_loop().create_task(
            self._run(link, call_id, request, message.decoupled, slots, timeout_s))
        self._tasks.setdefault(link, {})[call_id] = task
        task.add_done_callback(lambda t: self._done(link, call_id))

    def _done(self, link: WorkerLink, call_id: int) -> None:
        tasks = self._tasks.get(link)
        if tasks is not None:
            tasks.pop(call_id, None)
            if not tasks:
                del self._tasks[link]

    def _on_dropped(self, link: WorkerLink) -> None:
        """The caller is gone: its requests are withdrawn (their results released by the core)."""
        for task in list(self._tasks.get(link, {}).values()):
            task.cancel()

    def _on_cancel(self, link: WorkerLink, call_id: int) -> None:
        """The caller gave up one request (e.g. closed the iterator of a decoupled callee early): it is withdrawn."""
        task = self._tasks.get(link, {}).get(call_id)
        if task is not None:
            task.cancel()

    @staticmethod
    def _request(link: WorkerLink, message: Any, frames: list[zmq.Frame], slots: list[int]) -> InferRequest:
        item = message.request
        inputs: list[Tensor] = []
        for ref in item.inputs:
            shared = None
            if ref.frame:
                data: Any = frames[ref.frame - 1].buffer
            else:
                segments = link.segments
                assert segments is not None
                slots.append(slot_key(ref.segment, ref.offset))
                data = segments.view(ref.segment, ref.offset, ref.nbytes)
                shared = ArenaSlot(segments.owner_pid, segments.kind, ref.segment, ref.offset)  # passed on, not copied
            inputs.append(Tensor(ref.name, CODE_TO_TRITON[ref.dtype], tuple(ref.shape), data, shared=shared))
        parameters = params_from_proto(item.parameters) if item.parameters else {}
        request_id, correlation_id, flags = decode_request_fields(item)
        if correlation_id:  # the callee sees them as a client's sequence parameters
            parameters["sequence_id"] = correlation_id
        if flags & 1:
            parameters["sequence_start"] = True
        if flags & 2:
            parameters["sequence_end"] = True
        if message.timeout_us:  # (the callee's request.timeout(), as a client's timeout parameter gives it)
            parameters["timeout"] = message.timeout_us
        return InferRequest(message.model_name, message.model_version, request_id, inputs,
                            [RequestedOutput(name) for name in item.requested_outputs], parameters,
                            chain=decode_chain(item))

    async def _run(self, link: WorkerLink, call_id: int, request: InferRequest, decoupled: bool, slots: list[int],
                   timeout_s: float | None = None) -> None:  # fmt: skip
        router = self.router

        def release_inputs() -> None:  # (before the answer is sent, so that the release rides on it)
            held = slots[:]
            slots.clear()
            link.release(held)

        # The request's timeout bounds the wait for its (first) answer: then it is withdrawn, wherever it waits.
        expired: list[bool] = []
        timer = None
        if timeout_s is not None:
            task = asyncio.current_task()
            assert task is not None

            def expire() -> None:
                expired.append(True)
                task.cancel()

            timer = asyncio.get_running_loop().call_later(timeout_s, expire)
        try:
            if decoupled:
                ended = False  # the callee flagged its last response final: no empty final follows it
                async for response in self.infer_stream(request, errors_inline=True):
                    if timer is not None:
                        timer.cancel()
                    ended = response.final
                    if ended:
                        release_inputs()
                    if response.error is not None:  # an error response: handed on, and the stream goes on
                        router.send_bls_result(link, call_id, error=response.error.message, final=ended,
                                               error_code=_CODES.index(response.error.status))
                        continue
                    self._answer(link, call_id, response, final=ended)
                if not ended:
                    release_inputs()
                    router.send_bls_result(link, call_id, final=True)
            else:
                response = await self.infer(request)
                if timer is not None:
                    timer.cancel()
                release_inputs()
                self._answer(link, call_id, response, final=True)
        except ServerError as exc:
            release_inputs()
            message = exc.message
            if exc.status is Status.NOT_FOUND and message.startswith(UNKNOWN_MODEL):  # (Triton's stub's words)
                message = f"Failed for execute the inference request. Model '{request.model_name}' is not ready."
            router.send_bls_result(link, call_id, error=message, error_code=_CODES.index(exc.status))
        except asyncio.CancelledError:
            release_inputs()
            if expired:
                router.send_bls_result(link, call_id, error="Request timeout expired",
                                       error_code=_CODES.index(Status.UNAVAILABLE))
                return
            router.send_bls_result(link, call_id, error="the BLS request was cancelled",
                                   error_code=_CODES.index(Status.CANCELLED))
            raise
        except Exception as exc:
            logger.exception("BLS request to model '%s' failed", request.model_name)
            release_inputs()
            router.send_bls_result(link, call_id, error=f"internal error: {exc}", error_code=1)
        finally:
            if timer is not None:
                timer.cancel()
            release_inputs()

    def _answer(self, link: WorkerLink, call_id: int, response: InferResponse, final: bool) -> None:
        try:
            inline_max = self.router.inline_max
            # Small outputs ride as frames: copied, since the callee's slots are released right after the send.
            outputs = [TensorData(t.name, t.datatype, t.shape, bytes(t.data) if t.nbytes <= inline_max else t.data)
                       for t in response.outputs if t.data is not None]
            self.router.send_bls_result(link, call_id, outputs, response.parameters, final=final)
        finally:
            response.release()
