"""`pytriton serve`'s gRPC transport limits, keepalive/ping policy (Triton's option names) and response compression:
the command receives them as one `grpc_limits` (`H2Limits`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from pytriton.config.h2 import INFER_COMPRESSION_LEVELS, keepalive_fields
from pytriton.frontend.grpc import H2Limits

_NAMES = ("grpc_max_concurrent_streams", "grpc_max_header_list_size", "grpc_max_message_bytes",
          "grpc_max_decompressed_bytes", "grpc_idle_timeout", "grpc_max_stream_requests_in_flight",
          "grpc_keepalive_time", "grpc_keepalive_timeout", "grpc_keepalive_permit_without_calls",
          "grpc_http2_max_pings_without_data", "grpc_http2_min_recv_ping_interval_without_data",
          "grpc_http2_max_ping_strikes", "grpc_infer_response_compression_level")


def limits_of(given: dict[str, Any]) -> H2Limits:
    """The H2Limits the options chose."""
    return H2Limits(max_concurrent_streams=given["grpc_max_concurrent_streams"],
                    max_header_list_size=given["grpc_max_header_list_size"],
                    max_message_bytes=given["grpc_max_message_bytes"],
                    max_decompressed_bytes=given["grpc_max_decompressed_bytes"],
                    idle_timeout_s=given["grpc_idle_timeout"] or None,
                    max_stream_requests_in_flight=given["grpc_max_stream_requests_in_flight"],
                    infer_response_compression=given["grpc_infer_response_compression_level"],
                    **keepalive_fields(given["grpc_keepalive_time"], given["grpc_keepalive_timeout"],
                                       given["grpc_keepalive_permit_without_calls"],
                                       given["grpc_http2_max_pings_without_data"],
                                       given["grpc_http2_min_recv_ping_interval_without_data"],
                                       given["grpc_http2_max_ping_strikes"]))


def grpc_limit_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the gRPC limit, keepalive and compression flags to `command`, which receives them as `grpc_limits`."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["grpc_limits"] = limits_of({name: kwargs.pop(name) for name in _NAMES})
        return command(*args, **kwargs)

    options = [
        click.option("--grpc-max-concurrent-streams", type=click.IntRange(min=1), default=H2Limits.max_concurrent_streams,
                     show_default=True, help="Streams open at once per gRPC connection; more are refused (REFUSED_STREAM)."),
        click.option("--grpc-max-header-list-size", type=click.IntRange(min=1), default=H2Limits.max_header_list_size,
                     show_default=True, help="Largest gRPC request header list (metadata), in bytes."),
        click.option("--grpc-max-message-bytes", type=click.IntRange(min=1), default=H2Limits.max_message_bytes,
                     show_default=True, help="Largest gRPC request message as sent (Triton's limit, 2 GiB - 1); a "
                                             "compressed one is also bounded once decompressed by "
                                             "--grpc-max-decompressed-bytes."),
        click.option("--grpc-max-decompressed-bytes", type=click.IntRange(min=1), default=H2Limits.max_decompressed_bytes,
                     show_default=True, help="Largest gzip/deflate-compressed gRPC request message once decompressed "
                                             "(so that a small compressed message cannot inflate to gigabytes); "
                                             "uncompressed messages are bounded by --grpc-max-message-bytes alone."),
        click.option("--grpc-idle-timeout", type=click.FloatRange(min=0), default=H2Limits.idle_timeout_s, show_default=True,
                     help="Seconds a gRPC connection without calls stays open (0 = for ever)."),
        click.option("--grpc-max-stream-requests-in-flight", type=click.IntRange(min=1),
                     default=H2Limits.max_stream_requests_in_flight, show_default=True,
                     help="Requests of one ModelStreamInfer stream served at once; the next waits (flow control holds the "
                          "client)."),
        click.option("--grpc-keepalive-time", type=click.IntRange(min=0), default=int((H2Limits.keepalive_time_s or 0) * 1000),
                     show_default=True, help="Milliseconds without anything read from a gRPC client after which the server "
                                             "sends it a keepalive PING (2147483647: never)."),
        click.option("--grpc-keepalive-timeout", type=click.IntRange(min=0), default=int(H2Limits.keepalive_timeout_s * 1000),
                     show_default=True, help="Milliseconds a keepalive PING may go unacknowledged; then the connection is "
                                             "closed."),
        click.option("--grpc-keepalive-permit-without-calls", type=click.BOOL, default=H2Limits.keepalive_permit_without_calls,
                     show_default=True, help="Keepalive PINGs on connections without calls too, both ways (else a client's "
                                             "PINGs there are allowed once per 2 hours)."),
        click.option("--grpc-http2-max-pings-without-data", type=click.IntRange(min=0),
                     default=H2Limits.max_pings_without_data, show_default=True,
                     help="Keepalive PINGs the server sends while it sends no data; then none until it does (0 = no limit)."),
        click.option("--grpc-http2-min-recv-ping-interval-without-data", type=click.IntRange(min=0),
                     default=int(H2Limits.min_ping_interval_s * 1000), show_default=True,
                     help="Milliseconds a client must leave between PINGs while the server sends no data; a sooner PING is "
                          "a strike."),
        click.option("--grpc-http2-max-ping-strikes", type=click.IntRange(min=0), default=H2Limits.max_ping_strikes,
                     show_default=True, help="Strikes tolerated; past them: GOAWAY ENHANCE_YOUR_CALM 'too_many_pings' "
                                             "(0 = any number)."),
        click.option("--grpc-infer-response-compression-level",
                     type=click.Choice(list(INFER_COMPRESSION_LEVELS), case_sensitive=False),
                     default=H2Limits.infer_response_compression, show_default=True,
                     help="gzip-compress ModelInfer/ModelStreamInfer responses for clients that accept gzip (zlib level "
                          "1, 6, 9 for low, medium, high)."),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


__all__ = ["grpc_limit_options", "limits_of"]
