"""Responses: `InferenceResponse`, the iterators that hand them out, and the task on the server's loop that runs one
request through the core and turns its results into responses.

Outputs are Tensors viewing the response shared memory (no copy): the slots go back to the worker once every
Tensor (and every array made from one) of the response is garbage collected. With an `output_memory_allocator`
the outputs are copied into its buffers and the slots go back at once.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import queue
import weakref
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import numpy as np

from pytriton.core.types import InferResponse
from pytriton.exceptions import ServerError
from pytriton.tritonserver._enums import DataType, MemoryType
from pytriton.tritonserver._errors import CancelledError, InternalError, TritonError, from_server_error
from pytriton.tritonserver._gpu_outputs import output_tensor
from pytriton.tritonserver._memory import MemoryBuffer, parse_device_or_memory_type
from pytriton.tritonserver._tensor import Tensor

if TYPE_CHECKING:
    from pytriton.tritonserver._model import Model
    from pytriton.tritonserver._request import InferenceRequest
    from pytriton.tritonserver._runtime import ServerRuntime

CANCELLED_MESSAGE = "Request was cancelled"


@dataclasses.dataclass
class InferenceResponse:
    """One response of a request: outputs, parameters, or its error; `final` on the request's last response."""

    model: Model
    request_id: Optional[str] = None
    parameters: dict[str, Union[str, int, bool]] = dataclasses.field(default_factory=dict)
    outputs: dict[str, Tensor] = dataclasses.field(default_factory=dict)
    error: Optional[TritonError] = None
    classification_label: Optional[str] = None
    final: bool = False


class _ResponseMemory:
    """Stands for one core response's output buffers; when the last array viewing them is gone, it is collected
    and the buffers go back to the worker (on the server's loop)."""

    __slots__ = ("__weakref__",)


class _OutputBytes(np.ndarray):
    """A uint8 view of one output's bytes that keeps its response's memory alive (views of it do too)."""

    _memory: _ResponseMemory


def make_response(model: Model, request: InferenceRequest, response: InferResponse, runtime: ServerRuntime,
                  final: bool, placed: dict[str, MemoryBuffer] | None = None) -> InferenceResponse:
    """The API's response for one core response; its output buffers are released when no longer viewed (or at
    once, after a copy into the request's allocator)."""
    memory = _ResponseMemory()
    release = response.release
    weakref.finalize(memory, runtime.call_soon, release)
    outputs: dict[str, Tensor] = {}
    allocator = request.output_memory_allocator
    wanted = (parse_device_or_memory_type(request.output_memory_type) if request.output_memory_type is not None
              else (MemoryType.CPU, 0))
    for tensor in response.outputs:
        if tensor.data is None and placed and tensor.name in placed:  # the worker wrote it into the allocator's
            outputs[tensor.name] = output_tensor(tensor.datatype, tuple(tensor.shape), placed[tensor.name])
            continue
        data = tensor.data if tensor.data is not None else b""
        raw = np.frombuffer(data, dtype=np.uint8).view(_OutputBytes)
        raw._memory = memory
        buffer = MemoryBuffer(data_ptr=int(raw.ctypes.data), memory_type=MemoryType.CPU, memory_type_id=0,
                              size=raw.nbytes, owner=raw)
        output = Tensor(DataType.__members__[tensor.datatype], list(tensor.shape), buffer)
        if allocator is not None:
            output = output._place(allocator, wanted[0], wanted[1], tensor.name)
        elif wanted[0] != MemoryType.CPU:
            output = output.to_device(wanted)
        outputs[tensor.name] = output
    del memory  # the arrays hold it now (or nothing does: released)
    return InferenceResponse(model, response.id, dict(response.parameters), outputs,
                             final=final)


class RequestRun:
    """One request on the server's loop: submits it to the core and delivers each response through `deliver`
    (called on the loop). `cancel()` may be called from any thread."""

    def __init__(self, runtime: ServerRuntime, model: Model, request: InferenceRequest,
                 deliver: Callable[[InferenceResponse], None]):
        self.runtime = runtime
        self.model = model
        self.request = request
        self.deliver = deliver
        self.task: asyncio.Task[Any] | None = None
        self._begun = False
        self._cancelled = False
        self._placed: dict[str, Any] = {}  # output name -> the allocator's GPU buffer the worker writes it into
        self._held: list[Any] = []  # CUDA regions of GPU inputs and outputs (core.shm.own_cuda), until it ends
        self._served = model  # the model as its responses name it: with the version that ran, once one came

    def _model_of(self, response: InferResponse) -> Model:
        """The response's model: name and version of the model that ran (Triton's responses say which version
        answered a request for version -1); the caller's Model object is left as it is."""
        served = self._served
        version = int(response.model_version) if response.model_version.isdigit() else served.version
        if served.name != response.model_name or served.version != version:
            served = copy.copy(self.model)
            served.name, served.version = response.model_name, version
            self._served = served
        return served

    def submit(self) -> None:
        """Hand the request to the model's scheduler; errors of the request itself (unknown model, wrong inputs)
        are raised here, later ones come as error responses."""
        core_request, tensors, exported, placed = self.request._to_core(self._ipc_config)
        self._tensors = tensors  # their memory is viewed until the request ends
        self._placed = {p.requested.name: p.buffer for p in placed if p.buffer is not None}

        async def begin() -> None:
            core = self.runtime.core
            model = core.registry.get(core_request.model_name, core_request.model_version)
            for core_tensor, device_input in exported:  # the request's own CUDA regions, held until it ends
                region = core.shm.own_cuda(device_input.handle, device_input.device_id, device_input.allocation_size,
                                           device_input.keep)
                assert core_tensor.region is not None  # (made with one by _to_core)
                core_tensor.region.owned = region
                self._held.append(region)
            for output in placed:  # outputs the worker writes into the allocator's GPU buffers
                if output.device_input is not None:
                    exported_buffer = output.device_input
                    output.requested.owned = core.shm.own_cuda(exported_buffer.handle, exported_buffer.device_id,
                                                               exported_buffer.allocation_size, exported_buffer.keep)
                    self._held.append(output.requested.owned)
            self.task = asyncio.ensure_future(self._run(core, core_request, model.config.decoupled))
            await asyncio.sleep(0)  # the task's first step (the core's validation and submission) runs now
            if self.task.done() and not self.task.cancelled() and self.task.exception() is not None:
                raise self.task.exception()  # type: ignore[misc]  # checked not None above
            self._begun = True

        self.runtime.call(begin())

    async def _run(self, core: Any, core_request: Any, decoupled: bool) -> None:
        try:
            if decoupled:
                stream = core.infer_stream(core_request, errors_inline=True)
                ended = False
                try:
                    async for response in stream:
                        if self._cancelled:  # responses that came in one burst with the cancel are not handed out
                            response.release()
                            raise asyncio.CancelledError
                        ended = response.final  # the model sent it with the final flag (as Triton hands it out)
                        if response.error is not None:  # an error response: handed out, and the stream goes on
                            self.deliver(InferenceResponse(self._served, self.request.request_id or "",
                                                           error=from_server_error(response.error), final=ended))
                            continue
                        self.deliver(make_response(self._model_of(response), self.request, response, self.runtime,
                                                   final=ended))
                finally:
                    await stream.aclose()  # a cancelled stream is withdrawn now (the model's is_cancelled() says so)
                if not ended:  # the model sent the final flag alone: an empty final response, as in Triton
                    self.deliver(InferenceResponse(self._served, self.request.request_id or "", final=True))
            else:
                response = await core.infer(core_request)
                self.deliver(make_response(self._model_of(response), self.request, response, self.runtime,
                                           final=True, placed=self._placed))
        except asyncio.CancelledError:
            self._fail(CancelledError(CANCELLED_MESSAGE))
        except ServerError as exc:
            if not self._begun:
                raise
            self._fail(from_server_error(exc))
        except Exception as exc:  # noqa: BLE001 - e.g. an allocator that raised: the caller hears of it
            if not self._begun:
                raise
            self._fail(exc if isinstance(exc, TritonError) else InternalError(str(exc)))
        finally:
            self._tensors = []
            held, self._held = self._held, []
            core.shm.release(held)  # the regions go when the core is done with them too (workers unmap them)

    def _ipc_config(self) -> Any:
        """The model's configuration where GPU memory may reach it through CUDA IPC (the server sees a GPU, the model
        is no ensemble), else None (and for an unknown model, whose error comes when the request is submitted)."""
        model = self.model

        def check() -> Any:
            core = self.runtime.core
            if core is None or not core.shm.gpu_available():
                return None
            try:
                config = core.registry.get(model.name, model._version).config
            except ServerError:
                return None
            return config if config.ensemble_scheduling is None else None

        return self.runtime.run(check)

    def _fail(self, error: TritonError) -> None:
        response = InferenceResponse(self._served, self.request.request_id or "", error=error, final=True)
        error.args += (response,)
        self.deliver(response)

    def cancel(self) -> None:
        """Cancel the request: the model is told (its `is_cancelled()`), and the iterator ends with a CancelledError
        response unless the request had already ended. Responses already handed to the iterator stay there."""
        self._cancelled = True  # seen by the task before it hands out another response, even within one burst
        task = self.task
        if task is not None:
            self.runtime.call_soon(task.cancel)


class ResponseIterator:
    """Responses of one request in the order they came, for a calling thread; also put into the request's
    `response_queue` (a queue.SimpleQueue) when it has one."""

    def __init__(self, model: Model, request: InferenceRequest, raise_on_error: bool = False):
        self._model = model
        self._request = request
        self._raise_on_error = raise_on_error
        self._queue: queue.SimpleQueue[InferenceResponse] = queue.SimpleQueue()
        self._user_queue = request.response_queue
        self._complete = False
        self._run: RequestRun | None = None

    def _deliver(self, response: InferenceResponse) -> None:
        self._queue.put(response)
        if self._user_queue is not None:
            self._user_queue.put_nowait(response)

    def __iter__(self) -> ResponseIterator:
        return self

    def __next__(self) -> InferenceResponse:
        if self._complete:
            raise StopIteration
        response = self._queue.get()
        self._complete = response.final
        if response.error is not None and self._raise_on_error:
            raise response.error
        return response

    def cancel(self) -> None:
        """Cancel the request (best effort: one that already ran, or runs, may still answer)."""
        if self._run is not None:
            self._run.cancel()


class AsyncResponseIterator:
    """Responses of one request for an asyncio caller (on the loop it was created on); also put into the request's
    `response_queue` (an asyncio.Queue) when it has one."""

    def __init__(self, model: Model, request: InferenceRequest, raise_on_error: bool = False,
                 loop: asyncio.AbstractEventLoop | None = None):
        self._model = model
        self._request = request
        self._raise_on_error = raise_on_error
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        self._queue: asyncio.Queue[InferenceResponse] = asyncio.Queue()
        self._user_queue = request.response_queue
        self._complete = False
        self._run: RequestRun | None = None

    def _put(self, response: InferenceResponse) -> None:
        self._queue.put_nowait(response)
        if self._user_queue is not None:
            self._user_queue.put_nowait(response)

    def _deliver(self, response: InferenceResponse) -> None:
        try:
            self._loop.call_soon_threadsafe(self._put, response)
        except RuntimeError:  # the caller's loop is closed: nobody will read it
            pass

    def __aiter__(self) -> AsyncResponseIterator:
        return self

    async def __anext__(self) -> InferenceResponse:
        if self._complete:
            raise StopAsyncIteration
        response = await self._queue.get()
        self._complete = response.final
        if response.error is not None and self._raise_on_error:
            raise response.error
        return response

    def cancel(self) -> None:
        """Cancel the request (best effort)."""
        if self._run is not None:
            self._run.cancel()


__all__ = ["AsyncResponseIterator", "InferenceResponse", "RequestRun", "ResponseIterator"]
