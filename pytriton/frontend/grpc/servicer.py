"""`inference.GRPCInferenceService`: a thin adapter between protobuf messages and the core.

Served by the HTTP/2 transport of this package (`h2.Context`) or by grpc.aio; both hand each handler a
context with the few methods `CallContext` lists. A handler raises `ServerError` (or `AccessDenied`) and
`_grpc_handler` turns it into the call's status, the one place where errors meet gRPC codes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import grpc
from google.protobuf import json_format
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from pytriton.core.calls import Call
from pytriton.core.peers import register_shm, statistics_of_all, unregister_shm
from pytriton.core.registry import Model
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LOG_FORMATS, LogSettings, TraceSettings
from pytriton.core.types import InferRequest, InferResponse
from pytriton.core.trace import GRPC_SEND_END, GRPC_SEND_START, GRPC_WAITREAD_END, Trace, Tracer, finish_on_sent
from pytriton.exceptions import ServerError, Status, invalid_arg, unsupported
from pytriton.frontend.access import GRPC_HEADER_PREFIX, AccessPolicy
from pytriton.frontend.admission import Admission
from pytriton.frontend.grpc._convert import error_status, to_infer_request, to_infer_response
from pytriton.frontend.grpc._stream_responses import (
    GRPC_ERROR_HEADER,
    ISSUED_FAILURES,
    StreamError,
    StreamItem,
    StreamResponses,
    stream_message,
)
from pytriton.frontend.grpc._trace import start_trace
from pytriton.frontend.grpc.wire import InferRequestView, InferResponseWire, StreamResponseWire
from pytriton.frontend.h2.message import RpcAbort
from pytriton.frontend.model_config_json import model_config_proto

# LogSettings' values by key: the parameter each takes, and the words of tritonserver 2.51's refusal of another
_LOG_KINDS = {"log_info": ("bool_param", "boolean"), "log_warning": ("bool_param", "boolean"),
              "log_error": ("bool_param", "boolean"), "log_verbose_level": ("uint32_param", "int32"),
              "log_format": ("string_param", "string"), "log_file": ("string_param", "string")}

logger = logging.getLogger("pytriton.frontend")

_Request = TypeVar("_Request")
_Response = TypeVar("_Response")


class CallContext(Protocol):
    """What handlers use of a call's context (grpc.aio's ServicerContext and `h2.Context` both have it)."""

    def invocation_metadata(self) -> Sequence[tuple[str, str | bytes]] | None: ...

    def peer(self) -> str: ...

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        """End the call with `code` (raises; never returns)."""


Handler = Callable[["InferenceServicer", _Request, CallContext], Awaitable[_Response]]


def _grpc_handler(group: str) -> Callable[[Handler[_Request, _Response]], Handler[_Request, _Response]]:
    """A unary handler of endpoint `group`: the client's access is checked first, and a `ServerError` or
    `AccessDenied` it raises ends the call with the matching gRPC status."""

    def wrap(handler: Handler[_Request, _Response]) -> Handler[_Request, _Response]:
        @functools.wraps(handler)
        async def handle(self: InferenceServicer, request: _Request, context: CallContext) -> _Response:
            try:
                self._allow(group, context)
                return await handler(self, request, context)
            except Exception as exc:  # what has no status goes on to the transport, which logs it
                await _end_call(context, exc)
                raise  # not reached: _end_call raises (this tells type checkers so)

        return handle

    return wrap


async def _end_call(context: CallContext, exc: Exception) -> None:
    """End the call with the gRPC status of `exc`; an error without one is raised again."""
    status = error_status(exc)
    if status is None:
        raise exc
    await context.abort(*status)
    raise exc  # abort() raises; if a context did not, the call still ends


def _abort_with_status(exc: Exception) -> Exception:
    """The transport's RpcAbort with the gRPC status of `exc`; `exc` itself when it has none (a bug)."""
    status = error_status(exc)
    return exc if status is None else RpcAbort(*status)


class _GrpcClient:
    """How admission reads a gRPC call's client (its context)."""

    @staticmethod
    def headers(context: CallContext) -> dict[str, str]:
        return _string_metadata(context)

    @staticmethod
    def peer(context: CallContext) -> str | None:
        return context.peer()

    @staticmethod
    def forwarded(context: CallContext) -> Sequence[tuple[str, str | bytes]]:
        return context.invocation_metadata() or ()


class _InferCall:
    """A ModelInfer call the core began (`h2.UnaryPending`): its answer once the call's future is done, with the gRPC
    front-end's trace timestamps where the request is traced."""

    __slots__ = ("_call", "_trace", "_tracer", "future", "watch")

    def __init__(self, call: Call, trace: Trace | None = None, tracer: Tracer | None = None):
        self._call = call
        self._trace = trace
        self._tracer = tracer
        self.future = call.future
        self.watch = call.watch

    def response(self) -> InferResponseWire:
        """The call's response as its message, or the ServerError it ended with."""
        trace = self._trace
        if trace is None:
            return to_infer_response(self._call.result())
        tracer = self._tracer
        assert tracer is not None
        try:
            response = self._call.result()
            trace.stamp(GRPC_SEND_START)
            wire = to_infer_response(response)
        except BaseException:
            tracer.finish(trace)
            raise
        wire.on_sent = finish_on_sent(tracer, trace, GRPC_SEND_END, wire.on_sent)
        return wire

    def answer(self) -> InferResponseWire:
        try:
            if self._trace is None:  # (`response` written out: one call per request fewer)
                return to_infer_response(self._call.result())
            return self.response()
        except Exception as exc:  # noqa: BLE001
            raise _abort_with_status(exc) from None

    def cancel(self) -> None:
        self._call.cancel()
        if self._trace is not None:
            assert self._tracer is not None
            self._tracer.finish(self._trace)


class InferenceServicer(service_pb2_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]  # no stubs: base is Any
    """Implements the Triton gRPC service methods this server supports; the rest answer UNIMPLEMENTED."""

    def __init__(
        self,
        core: ServerCore,
        log_settings: LogSettings | None = None,
        trace_settings: TraceSettings | None = None,
        header_forward_pattern: str | None = None,
        access: AccessPolicy | None = None,
        max_stream_requests_in_flight: int = 128,
        tracer: Tracer | None = None,
    ):
        self.core = core
        self.max_stream_requests_in_flight = max_stream_requests_in_flight
        self.access = access or AccessPolicy(header_prefix=GRPC_HEADER_PREFIX)
        self.log_settings = log_settings or LogSettings()
        self.trace_settings = trace_settings or TraceSettings()
        self.tracer = tracer or Tracer(self.trace_settings)
        self.admission = Admission(self.access, _GrpcClient(), "grpc", header_forward_pattern)
        self._config_cache: dict[tuple[str, str], tuple[Model, pb.ModelConfigResponse]] = {}

    def _allow(self, group: str, context: CallContext) -> None:
        """Raise AccessDenied unless this call may use the endpoint `group`."""
        self.admission.check(group, context)

    # ---- health and metadata -----------------------------------------------------------------
    @_grpc_handler("health")
    async def ServerLive(self, request: pb.ServerLiveRequest, context: CallContext) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=self.core.live)

    @_grpc_handler("health")
    async def ServerReady(self, request: pb.ServerReadyRequest, context: CallContext) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self.core.ready)

    @_grpc_handler("health")
    async def ModelReady(self, request: pb.ModelReadyRequest, context: CallContext) -> pb.ModelReadyResponse:
        """An unknown model (or version) is not ready: Triton answers `ready: false`, not NOT_FOUND."""
        try:
            ready = self.core.model_ready(request.name, request.version)
        except ServerError as exc:
            if exc.status is not Status.NOT_FOUND:
                raise
            ready = False
        return pb.ModelReadyResponse(ready=ready)

    @_grpc_handler("metadata")
    async def ServerMetadata(
        self, request: pb.ServerMetadataRequest, context: CallContext
    ) -> pb.ServerMetadataResponse:
        meta = self.core.server_metadata()
        return pb.ServerMetadataResponse(name=meta["name"], version=meta["version"], extensions=meta["extensions"])

    @_grpc_handler("metadata")
    async def ModelMetadata(self, request: pb.ModelMetadataRequest, context: CallContext) -> pb.ModelMetadataResponse:
        meta = self.core.model_metadata(request.name, request.version)
        return json_format.ParseDict(meta, pb.ModelMetadataResponse())

    @_grpc_handler("model-config")
    async def ModelConfig(self, request: pb.ModelConfigRequest, context: CallContext) -> pb.ModelConfigResponse:
        model = self.core.registry.get(request.name, request.version)
        key = (model.name, str(model.version))
        cached = self._config_cache.get(key)
        if cached is None or cached[0] is not model:
            config = model_config_proto(model.config)
            cached = self._config_cache[key] = (model, pb.ModelConfigResponse(config=config))
        return cached[1]

    @_grpc_handler("statistics")
    async def ModelStatistics(
        self, request: pb.ModelStatisticsRequest, context: CallContext
    ) -> pb.ModelStatisticsResponse:
        stats = await statistics_of_all(self.core, request.name, request.version)
        return json_format.ParseDict({"model_stats": stats}, pb.ModelStatisticsResponse())

    # ---- inference ---------------------------------------------------------------------------
    async def ModelInfer(self, request: InferRequestView, context: CallContext) -> InferResponseWire:
        """Begin the call, await it (what the HTTP/2 transport does without a task: `begin_model_infer`)."""
        try:
            call = self.begin_model_infer(request, context)
        except RpcAbort as exc:
            await context.abort(exc.code, exc.details)
            raise  # abort() raises; if a context did not, the call still ends
        try:
            try:
                await call.future
            except asyncio.CancelledError:
                call.cancel()
                raise
            except Exception:  # noqa: BLE001 - `response` raises it
                pass
            return call.response()
        except Exception as exc:  # what has no status goes on to the transport, which logs it
            await _end_call(context, exc)
            raise  # not reached: _end_call raises

    def begin_model_infer(self, request: InferRequestView, context: CallContext) -> _InferCall:
        """The one way a ModelInfer request begins (frontend/admission.py's steps, in gRPC's order): checked, converted
        and begun in the core now; the HTTP/2 transport answers it from a callback once it is done (`h2.Method.begin`),
        `ModelInfer` awaits it. What the call cannot begin with is raised as the transport's RpcAbort (a bug's
        exception as it is)."""
        try:
            admission = self.admission
            admission.enter(context)
            core = self.core
            model = core.registry.get(request.model_name, request.model_version)
            if model.config.decoupled:
                admission.refuse_decoupled(model)
            if self.tracer.active and (trace := start_trace(self.tracer, request, context)) is not None:
                infer_request = to_infer_request(request)
                trace.received(infer_request, GRPC_WAITREAD_END)
                try:
                    admission.admit(infer_request, context)
                    return _InferCall(core.begin(infer_request, model), trace, self.tracer)
                except BaseException:
                    self.tracer.finish(trace)
                    raise
            infer_request = to_infer_request(request)
            admission.admit(infer_request, context)
            return _InferCall(core.begin(infer_request, model))
        except Exception as exc:  # noqa: BLE001 - what has no status is raised as it is (the transport logs it)
            raise _abort_with_status(exc) from None

    async def ModelStreamInfer(
        self, requests: AsyncIterator[InferRequestView], context: CallContext
    ) -> AsyncIterator[StreamItem]:
        """Bidirectional stream: requests run concurrently; each ends with a response carrying the final flag.

        A stream the client may not use ends at once with the access error, before any request is read; the
        errors of one request are that request's `error_message`, and the stream goes on, unless the stream began
        with the header `triton_grpc_error: true` (Triton's): then the first error a request meets once issued (its
        model's error response, a failed execution) ends the stream with its gRPC status, and the requests still
        running are cancelled (an error in the request itself, e.g. a wrong input, stays its `error_message`). At most
        `max_stream_requests_in_flight` requests run at once (the next is read when one ends), and their responses
        wait for the transport in a bounded queue: a producer awaits room, so a client that reads slowly slows its
        requests' streams down to the model (see `ServerCore.infer_stream`)."""
        try:
            self.admission.enter(context)
        except Exception as exc:  # noqa: BLE001 - _end_call raises again what has no status
            await _end_call(context, exc)
        responses = StreamResponses()
        grpc_errors = _string_metadata(context).get(GRPC_ERROR_HEADER) == "true"
        room = asyncio.Semaphore(self.max_stream_requests_in_flight)
        tasks: set[asyncio.Task[None]] = set()

        def ended(task: asyncio.Task[None]) -> None:
            tasks.discard(task)
            room.release()

        async def read() -> None:
            try:
                iterator = aiter(requests)
                while True:
                    await room.acquire()  # the next request stays unread (its window unreturned) until one ends
                    try:
                        request = await anext(iterator)
                    except StopAsyncIteration:
                        break
                    task = asyncio.ensure_future(self._stream_one(request, context, responses, grpc_errors))
                    tasks.add(task)
                    task.add_done_callback(ended)
                if tasks:
                    await asyncio.gather(*list(tasks), return_exceptions=True)
            finally:
                responses.close()

        reader = asyncio.ensure_future(read())
        try:
            while (item := await responses.get()) is not None:
                if isinstance(item, StreamError):  # (triton_grpc_error) the stream ends with the request's status
                    await _end_call(context, item.error)
                yield item
            await reader  # raises what ended the reading (e.g. a message that cannot be read)
        finally:
            reader.cancel()
            for task in list(tasks):
                task.cancel()
            responses.release_unsent()

    async def _stream_one(self, request: InferRequestView, context: CallContext, responses: StreamResponses,
                          grpc_errors: bool = False) -> None:
        """Run one request of a stream; put its responses (or its error) on `responses`. `grpc_errors`: the stream's
        triton_grpc_error mode, where an error the request meets once issued is put as a `StreamError`."""
        trace = start_trace(self.tracer, request, context) if self.tracer.active else None
        try:
            infer_request = to_infer_request(request)
            if trace is not None:
                trace.received(infer_request, GRPC_WAITREAD_END)
            self.admission.admit(infer_request, context)
            model = self.core.registry.get(infer_request.model_name, infer_request.model_version)
            if not model.config.decoupled:
                if grpc_errors:
                    answer = await self._issued(infer_request, model)
                    if isinstance(answer, StreamError):
                        await responses.put(answer)
                        return
                    response = answer
                else:
                    response = await self.core.infer(infer_request)
                if trace is not None:
                    trace.stamp(GRPC_SEND_START)
                message = stream_message(model, request, response, True)
                if trace is not None and isinstance(message, StreamResponseWire):
                    message.response.on_sent = finish_on_sent(self.tracer, trace, GRPC_SEND_END,
                                                              message.response.on_sent)
                    trace = None  # finished once sent
                await responses.put(message)
                return
            stream = self.core.infer_stream(infer_request, errors_inline=True)
            ended = False  # the model sent its last response with the final flag: it goes out flagged, as in Triton
            try:
                async for response in stream:
                    ended = response.final
                    if response.error is not None:  # an error response: on the stream, which goes on (as Triton)
                        await responses.put(StreamError(response.error) if grpc_errors
                                            else pb.ModelStreamInferResponse(error_message=response.error.message))
                        continue
                    await responses.put(stream_message(model, request, response, ended))
            finally:
                await stream.aclose()  # cancelled while it awaited room: the job is withdrawn now, not when collected
            empty_final = request.parameters.get("triton_enable_empty_final_response")
            if not ended and empty_final is not None and empty_final.bool_param:
                await responses.put(stream_message(model, request, None, True))
        except Exception as exc:
            status = error_status(exc)
            if status is None:
                logger.exception("stream request failed")
            elif grpc_errors and isinstance(exc, ServerError) and exc.failure_reason in ISSUED_FAILURES:
                await responses.put(StreamError(exc))  # (a decoupled model's failed execution)
                return
            await responses.put(
                pb.ModelStreamInferResponse(error_message=status[1] if status else f"internal error: {exc}"))
        finally:
            if trace is not None:  # a decoupled model's trace ends with its last response (or the request's error)
                self.tracer.finish(trace)

    async def _issued(self, request: InferRequest, model: Model) -> InferResponse | StreamError:
        """(triton_grpc_error mode) The response of `request`, begun now (what is wrong with the request itself is
        raised here), or the error it met once issued as a StreamError."""
        call = self.core.begin(request, model)
        try:
            await call.future
        except asyncio.CancelledError:
            call.cancel()
            raise
        except Exception:  # noqa: BLE001 - `result` raises it (settled and counted)
            pass
        try:
            return call.result()
        except ServerError as exc:
            return StreamError(exc)

    # ---- settings ----------------------------------------------------------------------------
    @_grpc_handler("trace")
    async def TraceSetting(self, request: pb.TraceSettingRequest, context: CallContext) -> pb.TraceSettingResponse:
        model = request.model_name or None
        if model is not None:
            try:
                self.core.registry.get(model)
            except ServerError:
                raise invalid_arg(f"Request for unknown model : {model}") from None
        if request.settings:
            changes: dict[str, Any] = {}
            for key, setting in request.settings.items():
                values = list(setting.value)
                if len(values) > 1 and key in ("trace_rate", "trace_count", "log_frequency"):
                    raise invalid_arg(f"expect only 1 value for '{key}'")
                changes[key] = (values if key == "trace_level" else values[0]) if values else None
            current = self.trace_settings.update(changes, model)
        else:
            current = self.trace_settings.get(model)
        response = pb.TraceSettingResponse()
        for key, value in current.items():
            response.settings[key].value.extend(value if isinstance(value, list) else [value])
        return response

    @_grpc_handler("logging")
    async def LogSettings(self, request: pb.LogSettingsRequest, context: CallContext) -> pb.LogSettingsResponse:
        if request.settings:
            changes = {}
            for key, setting in request.settings.items():
                kind = setting.WhichOneof("parameter_choice")
                if key in _LOG_KINDS and key != "log_file" and kind != _LOG_KINDS[key][0]:
                    raise invalid_arg(f"expect {_LOG_KINDS[key][1]} for '{key}'")  # (an unset value too, as Triton)
                if key == "log_format" and setting.string_param not in LOG_FORMATS:
                    raise invalid_arg(f"invalid argument for log_format, got: {setting.string_param}")
                changes[key] = getattr(setting, kind) if kind else None
            current = self.log_settings.update(changes)
        else:
            current = self.log_settings.get()
        response = pb.LogSettingsResponse()
        for key, value in current.items():
            setting = response.settings[key]
            if isinstance(value, bool):
                setting.bool_param = value
            elif isinstance(value, int):
                setting.uint32_param = value
            else:
                setting.string_param = value
        return response

    # ---- shared memory -----------------------------------------------------------------------
    @_grpc_handler("shared-memory")
    async def SystemSharedMemoryStatus(
        self, request: pb.SystemSharedMemoryStatusRequest, context: CallContext
    ) -> pb.SystemSharedMemoryStatusResponse:
        regions = {s["name"]: pb.SystemSharedMemoryStatusResponse.RegionStatus(**s)
                   for s in self.core.shm.system_status(request.name)}
        return pb.SystemSharedMemoryStatusResponse(regions=regions)

    @_grpc_handler("shared-memory")
    async def SystemSharedMemoryRegister(
        self, request: pb.SystemSharedMemoryRegisterRequest, context: CallContext
    ) -> pb.SystemSharedMemoryRegisterResponse:
        await register_shm(self.core, "system", request.name, request.key, request.offset, request.byte_size)
        return pb.SystemSharedMemoryRegisterResponse()

    @_grpc_handler("shared-memory")
    async def SystemSharedMemoryUnregister(
        self, request: pb.SystemSharedMemoryUnregisterRequest, context: CallContext
    ) -> pb.SystemSharedMemoryUnregisterResponse:
        await unregister_shm(self.core, "system", request.name)
        return pb.SystemSharedMemoryUnregisterResponse()

    @_grpc_handler("shared-memory")
    async def CudaSharedMemoryStatus(
        self, request: pb.CudaSharedMemoryStatusRequest, context: CallContext
    ) -> pb.CudaSharedMemoryStatusResponse:
        regions = {s["name"]: pb.CudaSharedMemoryStatusResponse.RegionStatus(**s)
                   for s in self.core.shm.cuda_status(request.name)}
        return pb.CudaSharedMemoryStatusResponse(regions=regions)

    @_grpc_handler("shared-memory")
    async def CudaSharedMemoryRegister(
        self, request: pb.CudaSharedMemoryRegisterRequest, context: CallContext
    ) -> pb.CudaSharedMemoryRegisterResponse:
        await register_shm(self.core, "cuda", request.name, request.raw_handle, request.device_id, request.byte_size)
        return pb.CudaSharedMemoryRegisterResponse()

    @_grpc_handler("shared-memory")
    async def CudaSharedMemoryUnregister(
        self, request: pb.CudaSharedMemoryUnregisterRequest, context: CallContext
    ) -> pb.CudaSharedMemoryUnregisterResponse:
        await unregister_shm(self.core, "cuda", request.name)
        return pb.CudaSharedMemoryUnregisterResponse()

    # ---- model repository --------------------------------------------------------------------
    @_grpc_handler("model-repository")
    async def RepositoryIndex(
        self, request: pb.RepositoryIndexRequest, context: CallContext
    ) -> pb.RepositoryIndexResponse:
        if request.repository_name:
            raise unsupported("'repository_name' specification is not supported")
        response = pb.RepositoryIndexResponse()
        for entry in self.core.repository_index(request.ready):
            response.models.add(**entry)
        return response

    @_grpc_handler("model-repository")
    async def RepositoryModelLoad(
        self, request: pb.RepositoryModelLoadRequest, context: CallContext
    ) -> pb.RepositoryModelLoadResponse:
        if request.repository_name:
            raise unsupported("'repository_name' specification is not supported")
        control = self.core.repository_control()
        await control.load(request.model_name, _load_parameters(request.parameters))
        return pb.RepositoryModelLoadResponse()

    @_grpc_handler("model-repository")
    async def RepositoryModelUnload(
        self, request: pb.RepositoryModelUnloadRequest, context: CallContext
    ) -> pb.RepositoryModelUnloadResponse:
        if request.repository_name:
            raise unsupported("'repository_name' specification is not supported")
        control = self.core.repository_control()
        dependents = request.parameters.get("unload_dependents")
        await control.unload(request.model_name, bool(dependents is not None and dependents.bool_param))
        return pb.RepositoryModelUnloadResponse()


def _load_parameters(parameters: Any) -> dict[str, str | bytes]:
    """A load request's parameters as the controller takes them: `config` a string_param and `file:` parameters
    bytes_params, else INVALID_ARG in tritonserver 2.51's words; parameters of other names are passed on as they
    come."""
    values: dict[str, Any] = {}
    for key, value in parameters.items():
        choice = value.WhichOneof("parameter_choice")
        if choice is None:
            continue
        if key == "config" and choice != "string_param":
            raise invalid_arg("invalid value type for load parameter 'config', expected string_param.")
        if key.startswith("file:") and choice != "bytes_param":
            raise invalid_arg(f"invalid value type for load parameter '{key}', expected bytes_param.")
        values[key] = getattr(value, choice)
    return values


def _string_metadata(context: CallContext) -> dict[str, str]:
    return {key: value for key, value in (context.invocation_metadata() or ()) if isinstance(value, str)}
