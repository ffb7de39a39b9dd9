"""The gRPC front-end: the inference service and grpc.health.v1 on one address.

By default they are served by this package's own HTTP/2 transport (`h2`) in the event loop; setting
`PYTRITON_GRPC_SERVER=grpcio` in the environment serves them with grpc.aio instead (same servicer).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncIterator, Callable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from tritonclient.grpc import service_pb2

from pytriton.config.h2 import H2Limits
from pytriton.config.tls import TlsSettings
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.core.trace import Tracer
from pytriton.frontend._listen import listen
from pytriton.frontend.access import AccessPolicy
from pytriton.frontend.grpc.servicer import InferenceServicer
from pytriton.frontend.grpc.wire import (
    infer_response_chunks,
    on_sent_of,
    parse_infer_request,
    stream_response_chunks,
    wire_bytes,
)
from pytriton.frontend.h2 import connection as h2
from pytriton.frontend.tls import TlsAcceptor, read_pem, server_context

logger = logging.getLogger("pytriton.frontend")

MAX_MESSAGE_BYTES = 2**31 - 1
SERVICE_NAME = "inference.GRPCInferenceService"
HEALTH_SERVICE = "grpc.health.v1.Health"
IMPLEMENTATIONS = ("h2", "grpcio")


def _joined_unary(handler: Any) -> Any:
    """ModelInfer for grpc.aio: the response joined into bytes in the handler, its buffers released right then
    (grpc.aio drops a response it does not serialize, e.g. of a call cancelled meanwhile)."""

    async def call(request: Any, context: Any) -> Any:
        response = await handler(request, context)
        return None if response is None else wire_bytes(infer_response_chunks, response)

    return call


def _joined_stream(handler: Any) -> Any:
    """ModelStreamInfer for grpc.aio, the same way, response by response."""

    async def call(requests: Any, context: Any) -> AsyncIterator[bytes]:
        responses = handler(requests, context)
        try:
            async for response in responses:
                yield wire_bytes(stream_response_chunks, response)
        finally:
            await responses.aclose()

    return call


def _identity(data: bytes) -> bytes:
    return data


_ZERO_COPY = {"ModelInfer": _joined_unary, "ModelStreamInfer": _joined_stream}


def _service_handler(servicer: InferenceServicer) -> grpc.GenericRpcHandler:
    """The service's method handlers, as the generated code builds them, except that ModelInfer and
    ModelStreamInfer read requests with the zero-copy parser of `_wire` and serialise in the handler."""
    service = service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    handlers = {}
    for method in service.methods:
        request_cls = getattr(service_pb2, method.input_type.name)
        response_cls = getattr(service_pb2, method.output_type.name)
        handler = getattr(servicer, method.name)
        deserialize, serialize = request_cls.FromString, response_cls.SerializeToString
        if method.name in _ZERO_COPY:
            handler = _ZERO_COPY[method.name](handler)
            deserialize, serialize = parse_infer_request, _identity
        if method.client_streaming and method.server_streaming:
            make = grpc.stream_stream_rpc_method_handler
        elif method.server_streaming:
            make = grpc.unary_stream_rpc_method_handler
        elif method.client_streaming:
            make = grpc.stream_unary_rpc_method_handler
        else:
            make = grpc.unary_unary_rpc_method_handler
        handlers[method.name] = make(handler, request_deserializer=deserialize, response_serializer=serialize)
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)


def _serialize_one(response: Any) -> list[Any]:
    return [response.SerializeToString()]


def h2_methods(servicer: InferenceServicer, health_service: "HealthService") -> dict[bytes, h2.Method]:
    """The method table of the HTTP/2 transport: path -> handler and (de)serialisers."""
    chunked = {
        "ModelInfer": (parse_infer_request, infer_response_chunks),
        "ModelStreamInfer": (parse_infer_request, stream_response_chunks),
    }
    methods = {}
    service = service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    core = servicer.core

    def repository_bound() -> int:  # (the controller attached to the core says what a load may carry)
        return core.repository_request_bytes(http=False)

    for method in service.methods:
        request_cls = getattr(service_pb2, method.input_type.name)
        deserialize, serialize = chunked.get(method.name, (request_cls.FromString, _serialize_one))
        methods[f"/{SERVICE_NAME}/{method.name}".encode()] = h2.Method(
            getattr(servicer, method.name), deserialize, serialize, method.client_streaming, method.server_streaming,
            on_sent_of if method.name in chunked else None, compress=method.name in chunked,
            in_place=method.name in chunked, begin=servicer.begin_model_infer if method.name == "ModelInfer" else None,
            max_message_bytes=repository_bound if method.name.startswith("Repository") else None,
        )
    request = health_pb2.HealthCheckRequest.FromString
    methods[f"/{HEALTH_SERVICE}/Check".encode()] = h2.Method(health_service.Check, request, _serialize_one)
    methods[f"/{HEALTH_SERVICE}/Watch".encode()] = h2.Method(
        health_service.Watch, request, _serialize_one, server_streaming=True
    )
    return methods


class HealthService:
    """grpc.health.v1.Health for the HTTP/2 transport: Check, and Watch (the status now, then each change)."""

    def __init__(self) -> None:
        self._status: dict[str, int] = {}
        self._watchers: set[asyncio.Queue[Any]] = set()

    async def set(self, service: str, status: int) -> None:  # async, as grpc_health's servicer
        self._status[service] = status
        for queue in self._watchers:
            queue.put_nowait(None)

    async def Check(self, request: Any, context: h2.Context) -> Any:
        status = self._status.get(request.service)
        if status is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, "")
        return health_pb2.HealthCheckResponse(status=status)

    async def Watch(self, request: Any, context: h2.Context) -> AsyncIterator[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._watchers.add(queue)
        try:
            last = None
            while True:
                status = self._status.get(request.service, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
                if status != last:
                    last = status
                    yield health_pb2.HealthCheckResponse(status=status)
                await queue.get()
        finally:
            self._watchers.discard(queue)


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
        implementation: str = "h2",
        limits: H2Limits | None = None,
        tracer: Tracer | None = None,
        reuse_port: bool = False,
        tls: TlsSettings | None = None,
    ):
        self.core = core
        self.tls = tls  # TLS (and mutual TLS) on the port; None: plain text
        self._acceptor: TlsAcceptor | None = None
        self.reuse_port = reuse_port
        self.limits = limits or H2Limits()
        self.servicer = InferenceServicer(core, log_settings, trace_settings, header_forward_pattern, access,
                                          self.limits.max_stream_requests_in_flight, tracer)
        self.address = address
        self.requested_port = port
        self.port: int | None = None
        self.implementation = implementation  # ServerConfig.grpc_implementation (PYTRITON_GRPC_SERVER)
        if self.implementation not in IMPLEMENTATIONS:
            raise ValueError(f"gRPC implementation {implementation!r}: expected one of {', '.join(IMPLEMENTATIONS)}")
        self._server: Any = None
        self._connections: set[h2.GrpcConnection] = set()
        self._health: Any = HealthService() if self.implementation == "h2" else health.aio.HealthServicer()

    async def start(self) -> int:
        context = server_context(self.tls, ["h2"]) if self.tls is not None else None  # bad files: no start
        if self.implementation == "h2":
            return await self._start_h2(context)
        limits = self.limits
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", limits.max_message_bytes),
            ("grpc.max_concurrent_streams", limits.max_concurrent_streams),
            ("grpc.max_metadata_size", limits.max_header_list_size),
            *limits.grpcio_options(),  # keepalive and the ping policy
            ("grpc.so_reuseport", int(self.reuse_port)),
        ]
        if limits.idle_timeout_s is not None:
            options.append(("grpc.max_connection_idle_ms", int(limits.idle_timeout_s * 1000)))
        # grpcio compresses every response then (grpc.aio ignores a handler's set_compression), with grpc core's
        # own zlib level, for clients that accept gzip
        compression = grpc.Compression.Gzip if limits.infer_gzip_level is not None else None
        server = grpc.aio.server(options=options, compression=compression)
        server.add_generic_rpc_handlers((_service_handler(self.servicer),))
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        target = f"{self.address}:{self.requested_port}"
        port: int
        try:
            if self.tls is not None:
                cert, key, root = read_pem(self.tls)
                credentials = grpc.ssl_server_credentials([(key, cert)], root_certificates=root,
                                                          require_client_auth=self.tls.mutual)
                port = server.add_secure_port(target, credentials)
            else:
                port = server.add_insecure_port(target)
        except RuntimeError as exc:
            raise OSError(f"cannot listen for gRPC on {target}: {exc}") from exc
        if not port:
            raise OSError(f"cannot listen for gRPC on {target}: address in use or not available")
        await server.start()
        self._server = server
        self.port = port
        logger.info("Started GRPCInferenceService at %s:%d", self.address, port)
        self._log_tls()
        return port

    async def _start_h2(self, context: Any) -> int:
        methods = h2_methods(self.servicer, self._health)

        def connection() -> asyncio.BaseProtocol:
            return h2.GrpcConnection(methods, self._connections, self.limits, self.core.received)

        factory: Callable[[], asyncio.BaseProtocol] = connection
        if context is not None:  # the handshake is bounded by the header timeout, as the preface is
            self._acceptor = TlsAcceptor(context, self.limits.header_timeout_s, "gRPC")
            factory = self._acceptor.wrap(connection)
        self._server, self.port = await listen(factory, self.address, self.requested_port, "gRPC",
                                               "GRPCInferenceService", self.reuse_port)
        if self._acceptor is not None:
            self._acceptor.port = f"gRPC port {self.port}"
        self._log_tls()
        return self.port

    def _log_tls(self) -> None:
        if self.tls is not None:
            logger.info("gRPC port %d: TLS%s", self.port, ", client certificates required" if self.tls.mutual else "")

    async def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        await self._health.set("", status)
        await self._health.set(SERVICE_NAME, status)

    async def stop(self, grace_s: float | None = 5.0) -> None:
        """Stop listening; calls in progress get `grace_s` to finish (None: wait for them), then are cancelled."""
        server, self._server = self._server, None
        if server is None:
            return
        if self.implementation != "h2":
            await server.stop(grace_s)
            return
        server.close()
        if self._acceptor is not None:
            self._acceptor.close()  # handshakes in progress: their connections are closed
        connections = list(self._connections)
        for connection in connections:
            connection.goaway()
        waits = [asyncio.ensure_future(c.idle.wait()) for c in connections if not c.idle.is_set()]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=grace_s)
            for wait in pending:
                wait.cancel()
        for connection in connections:
            connection.close()
        try:
            await asyncio.wait_for(server.wait_closed(), 2.0)
        except asyncio.TimeoutError:
            pass
