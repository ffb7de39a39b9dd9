"""`inference.GRPCInferenceService` on grpc.aio: a thin adapter between protobuf messages and the core."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncIterator

import grpc
from google.protobuf import json_format
from tritonclient.grpc import service_pb2 as pb, service_pb2_grpc  # noqa: F401 (servicer base)

from pytriton.core.access import GRPC_HEADER_PREFIX, AccessPolicy
from pytriton.core.header_forwarding import compile_forward_pattern, forward_headers
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.core.shm_registry import CudaShmRegion, SystemShmRegion
from pytriton.exceptions import ServerError, Status, invalid_arg, unsupported
from pytriton.frontend.grpc._convert import grpc_code, to_infer_request, to_infer_response
from pytriton.frontend.grpc._wire import StreamResponseWire, release_unsent
from pytriton.frontend.model_config_json import model_config_proto

logger = logging.getLogger("pytriton.frontend")


async def _abort(context: grpc.aio.ServicerContext, error: ServerError) -> None:
    await context.abort(grpc_code(error), error.message)


def _uses_shm(request: Any) -> bool:
    return any(t.data is None for t in request.inputs) or any(
        "shared_memory_region" in o.parameters for o in request.outputs
    )


class InferenceServicer(service_pb2_grpc.GRPCInferenceServiceServicer):
    """Implements the Triton gRPC service methods this server supports; the rest answer UNIMPLEMENTED."""

    def __init__(
        self,
        core: ServerCore,
        log_settings: LogSettings | None = None,
        trace_settings: TraceSettings | None = None,
        header_forward_pattern: str | None = None,
        access: AccessPolicy | None = None,
    ):
        self.core = core
        self.access = access or AccessPolicy(header_prefix=GRPC_HEADER_PREFIX)
        self.log_settings = log_settings or LogSettings()
        self.trace_settings = trace_settings or TraceSettings()
        self.forward = compile_forward_pattern(header_forward_pattern) if header_forward_pattern else None
        self._config_cache: dict[tuple[str, str], Any] = {}

    def _check_access(self, group: str, context: grpc.aio.ServicerContext) -> None:
        access = self.access
        if group not in access.restrictions and group != "shared-memory":
            return
        headers = (
            {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
            if group in access.restrictions
            else {}
        )
        denied = access.check(group, headers, context.peer())
        if denied is None:
            return
        if denied:
            raise ServerError(Status.UNAVAILABLE, f"This protocol is restricted, expecting header '{denied}'")
        raise ServerError(
            Status.UNAVAILABLE,
            "This protocol is restricted to clients on the server's host; restrict 'shared-memory' with an access "
            "token (--grpc-restricted-protocol) to let remote clients use it",
        )

    def _forward_headers(self, infer_request: Any, context: grpc.aio.ServicerContext) -> None:
        if self.forward is not None:
            forward_headers(self.forward, context.invocation_metadata() or (), infer_request.parameters)

    async def ServerLive(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check_access("health", context)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        return pb.ServerLiveResponse(live=self.core.live)

    async def ServerReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check_access("health", context)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        return pb.ServerReadyResponse(ready=self.core.ready)

    async def ModelReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check_access("health", context)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        try:
            return pb.ModelReadyResponse(ready=self.core.model_ready(request.name, request.version))
        except ServerError as exc:
            await _abort(context, exc)

    async def ServerMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check_access("metadata", context)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        meta = self.core.server_metadata()
        return pb.ServerMetadataResponse(name=meta["name"], version=meta["version"], extensions=meta["extensions"])

    async def ModelMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check_access("metadata", context)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        try:
            meta = self.core.model_metadata(request.name, request.version)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        return json_format.ParseDict(meta, pb.ModelMetadataResponse())

    async def ModelConfig(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check_access("model-config", context)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        try:
            model = self.core.registry.get(request.name, request.version)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        key = (model.name, str(model.version))
        cached = self._config_cache.get(key)
        if cached is None or cached[0] is not model:
            config = model_config_proto(model.config)
            cached = self._config_cache[key] = (model, pb.ModelConfigResponse(config=config))
        return cached[1]

    async def ModelStatistics(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check_access("statistics", context)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        try:
            stats = self.core.statistics(request.name, request.version)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        return json_format.ParseDict({"model_stats": stats}, pb.ModelStatisticsResponse())

    async def _infer(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self._check_access("inference", context)
        model = self.core.registry.get(request.model_name, request.model_version)
        if model.config.decoupled:
            raise unsupported("ModelInfer RPC doesn't support models with decoupled transaction policy")
        infer_request = to_infer_request(request)
        if _uses_shm(infer_request):
            self._check_access("shared-memory", context)
        self._forward_headers(infer_request, context)
        response = await self.core.infer(infer_request)
        return to_infer_response(response)

    async def ModelInfer(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await self._infer(request, context)
        except ServerError as exc:
            await _abort(context, exc)

    async def ModelStreamInfer(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        """Bidirectional stream: requests run concurrently; each yields one response with the final flag."""
        queue: asyncio.Queue = asyncio.Queue()
        tasks: set[asyncio.Task] = set()

        async def handle(request: Any) -> None:
            try:
                self._check_access("inference", context)
                infer_request = to_infer_request(request)
                if _uses_shm(infer_request):
                    self._check_access("shared-memory", context)
                self._forward_headers(infer_request, context)
                model = self.core.registry.get(infer_request.model_name, infer_request.model_version)
                if not model.config.decoupled:
                    response = await self.core.infer(infer_request)
                    message = to_infer_response(response)
                    message.parameters["triton_final_response"].bool_param = True
                    queue.put_nowait(StreamResponseWire(message))
                    return
                async for response in self.core.infer_stream(infer_request):
                    message = to_infer_response(response)
                    message.parameters["triton_final_response"].bool_param = False
                    queue.put_nowait(StreamResponseWire(message))
                empty_final = request.parameters.get("triton_enable_empty_final_response")
                if empty_final is not None and empty_final.bool_param:
                    message = pb.ModelInferResponse(
                        model_name=model.name, model_version=str(model.version), id=request.id
                    )
                    message.parameters["triton_final_response"].bool_param = True
                    queue.put_nowait(pb.ModelStreamInferResponse(infer_response=message))
            except ServerError as exc:
                queue.put_nowait(pb.ModelStreamInferResponse(error_message=exc.message))
            except Exception as exc:  # noqa: BLE001 - keep the stream alive, tell the client
                logger.exception("stream request failed")
                queue.put_nowait(pb.ModelStreamInferResponse(error_message=f"internal error: {exc}"))

        async def read() -> None:
            try:
                async for request in request_iterator:
                    task = asyncio.ensure_future(handle(request))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                if tasks:
                    await asyncio.gather(*list(tasks), return_exceptions=True)
            finally:
                queue.put_nowait(None)

        reader = asyncio.ensure_future(read())
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                yield item
        finally:
            reader.cancel()
            for task in list(tasks):
                task.cancel()
            while not queue.empty():  # responses the client will not get: their buffers go back now
                release_unsent(queue.get_nowait())

    async def TraceSetting(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check_access("trace", context)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        model = request.model_name or None
        try:
            if model is not None:
                try:
                    self.core.registry.get(model)
                except ServerError:
                    raise invalid_arg(f"Request for unknown model : {model}") from None
            if request.settings:
                changes: dict[str, Any] = {}
                for key, setting in request.settings.items():
                    values = list(setting.value)
                    if not values:
                        changes[key] = None
                    elif key == "trace_level":
                        changes[key] = values
                    else:
                        changes[key] = values[0]
                current = self.trace_settings.update(changes, model)
            else:
                current = self.trace_settings.get(model)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        response = pb.TraceSettingResponse()
        for key, value in current.items():
            response.settings[key].value.extend(value if isinstance(value, list) else [value])
        return response

    async def LogSettings(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check_access("logging", context)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        try:
            if request.settings:
                changes = {}
                for key, setting in request.settings.items():
                    kind = setting.WhichOneof("parameter_choice")
                    changes[key] = getattr(setting, kind) if kind else None
                current = self.log_settings.update(changes)
            else:
                current = self.log_settings.get()
        except ServerError as exc:
            await _abort(context, exc)
            return None
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
    async def _shm_call(self, context: grpc.aio.ServicerContext, call: Any) -> Any:
        try:
            self._check_access("shared-memory", context)
            return call()
        except ServerError as exc:
            await _abort(context, exc)
            return None

    async def SystemSharedMemoryStatus(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def call() -> Any:
            response = pb.SystemSharedMemoryStatusResponse()
            for status in self.core.shm.system_status(request.name):
                region = response.regions[status["name"]]
                region.name, region.key = status["name"], status["key"]
                region.offset, region.byte_size = status["offset"], status["byte_size"]
            return response

        return await self._shm_call(context, call)

    async def SystemSharedMemoryRegister(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def call() -> Any:
            self.core.shm.register_system(request.name, request.key, request.offset, request.byte_size)
            return pb.SystemSharedMemoryRegisterResponse()

        return await self._shm_call(context, call)

    async def SystemSharedMemoryUnregister(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def call() -> Any:
            self.core.shm.unregister(SystemShmRegion, request.name)
            return pb.SystemSharedMemoryUnregisterResponse()

        return await self._shm_call(context, call)

    async def CudaSharedMemoryStatus(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def call() -> Any:
            response = pb.CudaSharedMemoryStatusResponse()
            for status in self.core.shm.cuda_status(request.name):
                region = response.regions[status["name"]]
                region.name, region.device_id, region.byte_size = status["name"], status["device_id"], status["byte_size"]
            return response

        return await self._shm_call(context, call)

    async def CudaSharedMemoryRegister(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def call() -> Any:
            self.core.shm.register_cuda(request.name, request.raw_handle, request.device_id, request.byte_size)
            return pb.CudaSharedMemoryRegisterResponse()

        return await self._shm_call(context, call)

    async def CudaSharedMemoryUnregister(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def call() -> Any:
            self.core.shm.unregister(CudaShmRegion, request.name)
            return pb.CudaSharedMemoryUnregisterResponse()

        return await self._shm_call(context, call)

    # ---- model repository --------------------------------------------------------------------
    async def RepositoryIndex(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check_access("model-repository", context)
            if request.repository_name:
                raise unsupported("'repository_name' specification is not supported")
        except ServerError as exc:
            await _abort(context, exc)
            return None
        response = pb.RepositoryIndexResponse()
        for model in self.core.registry:
            if request.ready and not model.ready:
                continue
            response.models.add(name=model.name, version=str(model.version),
                                state="READY" if model.ready else "UNAVAILABLE")
        return response

    async def _no_explicit_control(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._check_access("model-repository", context)
            raise ServerError(Status.UNAVAILABLE, "explicit model load / unload is not allowed if polling is enabled")
        except ServerError as exc:
            await _abort(context, exc)

    async def RepositoryModelLoad(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._no_explicit_control(request, context)

    async def RepositoryModelUnload(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._no_explicit_control(request, context)
