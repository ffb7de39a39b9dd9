"""`inference.GRPCInferenceService` on grpc.aio: a thin adapter between protobuf messages and the core."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncIterator

import grpc
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2, service_pb2 as pb, service_pb2_grpc

from pytriton.core.server_core import ServerCore
from pytriton.exceptions import ServerError, unsupported
from pytriton.frontend.grpc._convert import grpc_code, to_infer_request, to_infer_response

logger = logging.getLogger("pytriton.frontend")


async def _abort(context: grpc.aio.ServicerContext, error: ServerError) -> None:
    await context.abort(grpc_code(error), error.message)


class InferenceServicer(service_pb2_grpc.GRPCInferenceServiceServicer):
    """Implements the Triton gRPC service methods this server supports; the rest answer UNIMPLEMENTED."""

    def __init__(self, core: ServerCore):
        self.core = core
        self._config_cache: dict[tuple[str, str], Any] = {}

    async def ServerLive(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return pb.ServerLiveResponse(live=self.core.live)

    async def ServerReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return pb.ServerReadyResponse(ready=self.core.ready)

    async def ModelReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return pb.ModelReadyResponse(ready=self.core.model_ready(request.name, request.version))
        except ServerError as exc:
            await _abort(context, exc)

    async def ServerMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        meta = self.core.server_metadata()
        return pb.ServerMetadataResponse(name=meta["name"], version=meta["version"], extensions=meta["extensions"])

    async def ModelMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            meta = self.core.model_metadata(request.name, request.version)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        return json_format.ParseDict(meta, pb.ModelMetadataResponse())

    async def ModelConfig(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            model = self.core.registry.get(request.name, request.version)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        key = (model.name, str(model.version))
        cached = self._config_cache.get(key)
        if cached is None or cached[0] is not model:
            config = json_format.ParseDict(model.config.to_triton_dict(), model_config_pb2.ModelConfig())
            cached = self._config_cache[key] = (model, pb.ModelConfigResponse(config=config))
        return cached[1]

    async def ModelStatistics(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            stats = self.core.statistics(request.name, request.version)
        except ServerError as exc:
            await _abort(context, exc)
            return None
        return json_format.ParseDict({"model_stats": stats}, pb.ModelStatisticsResponse())

    async def _infer(self, request: Any) -> Any:
        infer_request = to_infer_request(request)
        model = self.core.registry.get(infer_request.model_name, infer_request.model_version)
        if model.config.decoupled:
            raise unsupported("ModelInfer RPC doesn't support models with decoupled transaction policy")
        response = await self.core.infer(infer_request)
        return to_infer_response(response)

    async def ModelInfer(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await self._infer(request)
        except ServerError as exc:
            await _abort(context, exc)

    async def ModelStreamInfer(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        """Bidirectional stream: requests run concurrently; each yields one response with the final flag."""
        queue: asyncio.Queue = asyncio.Queue()
        tasks: set[asyncio.Task] = set()

        async def handle(request: Any) -> None:
            try:
                infer_request = to_infer_request(request)
                response = await self.core.infer(infer_request)
                message = to_infer_response(response)
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
