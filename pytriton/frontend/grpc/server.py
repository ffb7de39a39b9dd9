"""The gRPC front-end: a grpc.aio server with the inference service and grpc.health.v1."""

from __future__ import annotations

import logging

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from tritonclient.grpc import service_pb2

from pytriton.core.access import AccessPolicy
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.frontend.grpc._wire import parse_infer_request, serialize_infer_response, serialize_stream_response
from pytriton.frontend.grpc.servicer import InferenceServicer

logger = logging.getLogger("pytriton.frontend")

MAX_MESSAGE_BYTES = 2**31 - 1
SERVICE_NAME = "inference.GRPCInferenceService"


_ZERO_COPY = {
    "ModelInfer": (parse_infer_request, serialize_infer_response),
    "ModelStreamInfer": (parse_infer_request, serialize_stream_response),
}


def _service_handler(servicer: InferenceServicer) -> grpc.GenericRpcHandler:
    """The service's method handlers, as the generated code builds them, except that ModelInfer and
    ModelStreamInfer use the zero-copy (de)serializers of `_wire`."""
    service = service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    handlers = {}
    for method in service.methods:
        request_cls = getattr(service_pb2, method.input_type.name)
        response_cls = getattr(service_pb2, method.output_type.name)
        deserialize, serialize = _ZERO_COPY.get(method.name, (request_cls.FromString, response_cls.SerializeToString))
        if method.client_streaming and method.server_streaming:
            make = grpc.stream_stream_rpc_method_handler
        elif method.server_streaming:
            make = grpc.unary_stream_rpc_method_handler
        elif method.client_streaming:
            make = grpc.stream_unary_rpc_method_handler
        else:
            make = grpc.unary_unary_rpc_method_handler
        handlers[method.name] = make(
            getattr(servicer, method.name), request_deserializer=deserialize, response_serializer=serialize
        )
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)


class GrpcFrontend:
    """Serves `inference.GRPCInferenceService` and Health/Check on one address."""

    def __init__(
        self,
        core: ServerCore,
        address: str,
        port: int,
        log_settings: LogSettings | None = None,
        trace_settings: TraceSettings | None = None,
        header_forward_pattern: str | None = None,
        access: AccessPolicy | None = None,
    ):
        self.core = core
        self.servicer = InferenceServicer(core, log_settings, trace_settings, header_forward_pattern, access)
        self.address = address
        self.requested_port = port
        self.port: int | None = None
        self._server: grpc.aio.Server | None = None
        self._health = health.aio.HealthServicer()

    async def start(self) -> int:
        server = grpc.aio.server(
            options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
        )
        server.add_generic_rpc_handlers((_service_handler(self.servicer),))
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        target = f"{self.address}:{self.requested_port}"
        try:
            port = server.add_insecure_port(target)
        except RuntimeError as exc:
            raise OSError(f"cannot listen for gRPC on {target}: {exc}") from exc
        if not port:
            raise OSError(f"cannot listen for gRPC on {target}: address in use or not available")
        await server.start()
        self._server = server
        self.port = port
        logger.info("Started GRPCInferenceService at %s:%d", self.address, port)
        return port

    async def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        await self._health.set("", status)
        await self._health.set(SERVICE_NAME, status)

    async def stop(self, grace_s: float | None = 5.0) -> None:
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None
