"""BLS (Business Logic Scripting) in a worker: `pb_utils.InferenceRequest.exec` / `async_exec` send the request up the
worker's own socket to the server, which runs it like a network request; answers come back the same way.

Any thread of the model may make them (`initialize`, `execute`, threads it starts); the endpoint serialises the
socket. A request's `timeout` (microseconds, as Triton's) bounds the wait for its (first) answer.

Each request carries its call chain: the chains of the requests of the execution this instance runs now (the worker
runs one at a time), then this instance itself. The server refuses at once a call that would wait for an instance on
the chain (a cycle such as A -> B -> A with one instance each), instead of letting it wait forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from pytriton.backends import pb_utils
from pytriton.model_config.datatypes import numpy_to_triton
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.endpoint import WorkerEndpoint
from pytriton.proxy.messages import ModelLoading, WorkerToServer

ASYNC_WAIT_S = 0.02  # the longest an awaiting async_exec sleeps without looking at the socket (ZMQ signals edges)


class ServerGoneError(pb_utils.TritonModelException):
    """The server went away while a BLS request waited for its answer."""


class BlsClient:
    """Sends a model's `InferenceRequest`s through the worker's endpoint and turns the answers into
    `pb_utils.InferenceResponse`s."""

    def __init__(self, endpoint: WorkerEndpoint, config: TritonModelConfig, alive: Callable[[], bool], poll_ms: int,
                 instance: str = ""):
        self.endpoint = endpoint
        self.config = config
        self.alive = alive
        self.poll_ms = poll_ms
        self.caller = (config.model_name, config.model_version, instance)  # this instance, as a call chain names it
        # The INFER message of the execution this worker runs now (set by the worker loop; None between two): its
        # requests' call chains are what this instance's BLS requests extend.
        self.serving: Any = None
        self._wakeup: asyncio.Future[None] | None = None  # shared by the async_exec calls waiting now

    # ---- sending ------------------------------------------------------------------------------
    def chain(self) -> tuple[tuple[str, int, str], ...]:
        """The call chain of a request this instance makes now: those of the requests it serves, then itself."""
        message = self.serving
        chain: list[tuple[str, int, str]] = []
        if message is not None:
            for item in message.requests:
                for caller in item.callers:
                    link = (caller.model, caller.version, caller.instance)
                    if link not in chain:
                        chain.append(link)
        chain.append(self.caller)
        return tuple(chain)

    def _send(self, request: pb_utils.InferenceRequest, decoupled: bool) -> int:
        inputs = []
        for tensor in request.inputs():
            array = tensor._host()
            try:
                datatype = numpy_to_triton(array.dtype)
            except Exception as exc:  # noqa: BLE001
                raise pb_utils.TritonModelException(
                    f"input '{tensor.name()}' of the BLS request to model '{request.model_name()}': {exc}") from None
            if datatype == "BYTES" and array.dtype != np.object_:
                array = array.astype(np.object_)
            inputs.append((tensor.name(), datatype, array))
        version = request.model_version()
        fields = (request.request_id(), request.correlation_id(), request.flags())
        return self.endpoint.bls_send(request.model_name(), str(version) if version > 0 else "", inputs,
                                      request._requested, json_params(request), decoupled, fields,
                                      int(request._timeout_us), self.chain())

    # ---- receiving ----------------------------------------------------------------------------
    def _response(self, message: Any, frames: Any, model_name: str) -> pb_utils.InferenceResponse:
        if message.error:  # (as Triton's stub gives it: naming the model called, with the code INTERNAL whatever
            # the callee's error was)
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(
                f"Model {model_name} - Error when running inference: {message.error}", pb_utils.TritonError.INTERNAL))
        outputs, parameters = self.endpoint.bls_read(message, frames)
        return pb_utils.InferenceResponse([pb_utils.Tensor(name, array) for name, array in outputs],
                                          parameters=parameters)

    def _wait(self, call_id: int) -> tuple[Any, Any]:
        while True:
            got = self.endpoint.bls_poll(call_id, self.poll_ms)
            if got is not None:
                return got
            if not self.alive():
                self.endpoint.bls_abandon(call_id)
                raise ServerGoneError("the server went away while a BLS request waited for its answer")

    def exec(self, request: pb_utils.InferenceRequest, decoupled: bool) -> Any:
        call_id = self._send(request, decoupled)
        if decoupled:
            return self._stream(call_id, request.model_name())
        message, frames = self._wait(call_id)
        return self._response(message, frames, request.model_name())

    def _stream(self, call_id: int, model_name: str) -> Iterator[pb_utils.InferenceResponse]:
        """Each response of a decoupled callee as it comes; the last one (empty unless it carries an error) is flagged
        final. Closing the iterator early gives back whatever still comes."""
        done = False
        try:
            while not done:
                message, frames = self._wait(call_id)
                done = bool(message.final)
                if message.error or message.responses:
                    response = self._response(message, frames, model_name)
                else:
                    response = pb_utils.InferenceResponse()
                response._flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if done else 0
                yield response
        finally:
            if not done:
                self.endpoint.bls_abandon(call_id, tell=True)

    async def async_exec(self, request: pb_utils.InferenceRequest, decoupled: bool) -> Any:
        call_id = self._send(request, decoupled)
        responses: list[pb_utils.InferenceResponse] = []
        done = False
        try:
            while not done:
                got = self.endpoint.bls_poll(call_id, 0)
                if got is None:
                    if not self.alive():
                        raise ServerGoneError("the server went away while a BLS request waited for its answer")
                    await self._readable()
                    continue
                message, frames = got
                done = bool(message.final)
                if not decoupled:
                    return self._response(message, frames, request.model_name())
                response = (self._response(message, frames, request.model_name())
                            if message.error or message.responses else pb_utils.InferenceResponse())
                response._flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if done else 0
                responses.append(response)
        finally:
            if not done:
                self.endpoint.bls_abandon(call_id, tell=True)
        return iter(responses)


    # ---- the model loading API ------------------------------------------------------------------
    def model_loading(self, op: int, model_name: str, model_version: str = "", config: str = "",
                      files: dict[str, bytes] | None = None, unload_dependents: bool = False) -> bool:
        """One call of Triton's model loading API (`ModelLoading.READY`, `LOAD` or `UNLOAD`), answered by the server;
        its readiness for READY. A refusal is a `pb_utils.TritonModelException` with the server's words."""
        message = WorkerToServer(kind=WorkerToServer.MODEL_LOADING, model_name=model_name, model_version=model_version)
        loading = message.loading
        loading.op = op  # type: ignore[assignment]  # the stubs type an enum field by its ValueType, not int
        loading.config = config
        loading.files.update(files or {})
        loading.unload_dependents = unload_dependents
        loading.caller = self.caller[0]
        self.endpoint.send_upstream(message, reply=True)
        answer, _ = self._wait(message.id)
        if answer.error:
            raise pb_utils.TritonModelException(answer.error)
        return bool(answer.model_ready) if op == ModelLoading.READY else False

    async def _readable(self) -> None:
        """Wait until the socket may have something for us (or ASYNC_WAIT_S at most); one reader for all waiters."""
        wakeup = self._wakeup
        if wakeup is None or wakeup.done():
            loop = asyncio.get_running_loop()
            wakeup = self._wakeup = loop.create_future()
            fd = self.endpoint.fileno()

            def wake() -> None:
                if not wakeup.done():  # (only the first of the reader and the timer acts)
                    loop.remove_reader(fd)
                    wakeup.set_result(None)

            loop.add_reader(fd, wake)
            loop.call_later(ASYNC_WAIT_S, wake)
        await asyncio.shield(wakeup)


def json_params(request: pb_utils.InferenceRequest) -> dict[str, Any]:
    return dict(request._parameters)

