"""`KServeHttp` and `KServeGrpc`: Triton's KServe v2 HTTP/REST and gRPC protocols for an in-process server, served
by pytriton's HTTP and gRPC front-ends on the server's event loop. Option names and defaults are Triton's
(tritonfrontend `_kservehttp.py` / `_kservegrpc.py`)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Union

from pytriton.config.h2 import keepalive_fields
from pytriton.config.tls import TlsSettings
from pytriton.frontend.access import GRPC_HEADER_PREFIX, AccessPolicy
from pytriton.frontend.grpc.server import GrpcFrontend
from pytriton.frontend.http.app import HttpApp
from pytriton.frontend.http1 import HttpListener
from pytriton.server.composition import Server as ComposedServer
from pytriton.tritonfrontend._frontend import Frontend, Rule, check, text
from pytriton.tritonserver import InvalidArgumentError, UnsupportedError

_EVENT_LOOP = "requests are served by the server's event loop, not a thread pool"

_HTTP_RULES = {
    "address": Rule(str), "port": Rule(int, ge=0, le=65535), "reuse_port": Rule(bool),
    "thread_count": Rule(int, gt=0), "header_forward_pattern": Rule(str),
}


class KServeHttp(Frontend):
    """Triton's HTTP/REST (KServe v2) endpoints for an in-process `tritonserver.Server`."""

    @dataclasses.dataclass
    class Options:
        address: str = "0.0.0.0"
        port: int = 8000
        reuse_port: bool = False
        thread_count: int = 8
        header_forward_pattern: str = ""

        def __post_init__(self) -> None:
            check(self, _HTTP_RULES)

    _protocol = "HTTP"
    _inert = {"thread_count": _EVENT_LOOP}

    def _make(self, process: ComposedServer, options: Any) -> HttpListener:
        config = process.config
        assert process.host is not None
        app = HttpApp(
            process.core, process.log_settings, process.trace_settings,  # type: ignore[arg-type]  # core: started
            header_forward_pattern=text(options.header_forward_pattern),
            max_input_bytes=config.http_limits.max_input_bytes,
            access=AccessPolicy.from_specs(config.http_restricted_api, config.shm_local_only),
            connection_info={"address": process.host.address, "tag": process.tag},
            tracer=process.tracer,
        )
        return HttpListener(app.handle, options.address, options.port, "HTTPService", config.http_limits,
                            too_large_hint=app.too_large_hint, reuse_port=options.reuse_port, begin=app.begin)


class Grpc_compression_level(enum.IntEnum):  # noqa: N801 (Triton's name)
    NONE = 0
    LOW = 1
    MED = 2
    HIGH = 3
    COUNT = 4


_GRPC_RULES = {
    "address": Rule(str), "port": Rule(int, ge=0, le=65535), "reuse_port": Rule(bool),
    "use_ssl": Rule(bool), "server_cert": Rule(str), "server_key": Rule(str), "root_cert": Rule(str),
    "use_mutual_auth": Rule(bool),
    "keepalive_time_ms": Rule(int, ge=0), "keepalive_timeout_ms": Rule(int, ge=0),
    "keepalive_permit_without_calls": Rule(bool), "http2_max_pings_without_data": Rule(int, ge=0),
    "http2_min_recv_ping_interval_without_data_ms": Rule(int, ge=0), "http2_max_ping_strikes": Rule(int, ge=0),
    "max_connection_age_ms": Rule(int, ge=0), "max_connection_age_grace_ms": Rule(int, ge=0),
    "infer_compression_level": Rule(int), "infer_thread_count": Rule(int, ge=0),
    "infer_allocation_pool_size": Rule(int, ge=0), "max_response_pool_size": Rule(int, ge=0),
    "forward_header_pattern": Rule(str),
}


def _tls_of(options: Any) -> TlsSettings | None:
    """The port's TLS from Triton's fields (use_mutual_auth implies use_ssl here: never plain text by mistake)."""
    try:
        return TlsSettings.of(options.use_ssl, options.use_mutual_auth, options.server_cert, options.server_key,
                              options.root_cert, options=("use_ssl", "server_cert", "server_key", "root_cert"))
    except ValueError as exc:
        raise InvalidArgumentError(f"KServeGrpc.Options: {exc}") from None


_NO_AGE = "the server does not age connections"
_LEVEL_NAMES = {Grpc_compression_level.NONE: "none", Grpc_compression_level.LOW: "low",
                Grpc_compression_level.MED: "medium", Grpc_compression_level.HIGH: "high"}


class KServeGrpc(Frontend):
    """Triton's gRPC inference service (and grpc.health.v1) for an in-process `tritonserver.Server`."""

    Grpc_compression_level = Grpc_compression_level

    @dataclasses.dataclass
    class Options:
        address: str = "0.0.0.0"
        port: int = 8001
        reuse_port: bool = False
        use_ssl: bool = False
        server_cert: str = ""
        server_key: str = ""
        root_cert: str = ""
        use_mutual_auth: bool = False
        keepalive_time_ms: int = 7_200_000
        keepalive_timeout_ms: int = 20_000
        keepalive_permit_without_calls: bool = False
        http2_max_pings_without_data: int = 2
        http2_min_recv_ping_interval_without_data_ms: int = 300_000
        http2_max_ping_strikes: int = 2
        max_connection_age_ms: int = 0
        max_connection_age_grace_ms: int = 0
        infer_compression_level: Union[int, Grpc_compression_level] = Grpc_compression_level.NONE
        infer_thread_count: int = 2
        infer_allocation_pool_size: int = 8
        max_response_pool_size: int = 2_147_483_647
        forward_header_pattern: str = ""

        def __post_init__(self) -> None:
            check(self, _GRPC_RULES)  # the compression level becomes its int value, as in Triton

    _protocol = "GRPC"
    _inert = {
        "max_connection_age_ms": _NO_AGE, "max_connection_age_grace_ms": _NO_AGE,
        "infer_thread_count": _EVENT_LOOP, "infer_allocation_pool_size": _EVENT_LOOP,
        "max_response_pool_size": _EVENT_LOOP,
    }

    @classmethod
    def _check_options(cls, options: Any) -> None:
        if options.infer_compression_level not in _LEVEL_NAMES:
            raise UnsupportedError(f"infer_compression_level {options.infer_compression_level}: expected one of "
                                   "Grpc_compression_level.NONE, LOW, MED, HIGH (0-3)")
        _tls_of(options)

    def _make(self, process: ComposedServer, options: Any) -> GrpcFrontend:
        config = process.config
        limits = dataclasses.replace(
            config.grpc_limits, infer_response_compression=_LEVEL_NAMES[options.infer_compression_level],
            **keepalive_fields(options.keepalive_time_ms, options.keepalive_timeout_ms,
                               options.keepalive_permit_without_calls, options.http2_max_pings_without_data,
                               options.http2_min_recv_ping_interval_without_data_ms, options.http2_max_ping_strikes))
        return GrpcFrontend(
            process.core,  # type: ignore[arg-type]  # core is set once started
            options.address, options.port, process.log_settings, process.trace_settings,
            header_forward_pattern=text(options.forward_header_pattern),
            access=AccessPolicy.from_specs(config.grpc_restricted_protocol, config.shm_local_only,
                                           GRPC_HEADER_PREFIX, "protocol"),
            implementation=config.grpc_implementation, limits=limits, tracer=process.tracer,
            reuse_port=options.reuse_port, tls=_tls_of(options),
        )

    async def _started(self, service: Any) -> None:
        await service.set_serving(True)

    async def _stop(self, service: Any) -> None:
        await service.set_serving(False)
        await service.stop(grace_s=0.0)  # as Triton's: calls in progress are cancelled


__all__ = ["Grpc_compression_level", "KServeGrpc", "KServeHttp"]
