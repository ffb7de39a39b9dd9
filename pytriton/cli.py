"""`pytriton serve module:infer_fn ...` — a thin shell over `pytriton.app`."""

from __future__ import annotations

import logging
import os
import re
import sys

import click

from pytriton import _env
from pytriton.app import ModelSpec, ServerConfig, run
from pytriton.backends.target import CallableTarget, find_module
from pytriton.core.trace import parse_trace_config
from pytriton.exceptions import PyTritonError
from pytriton.frontend.access import AccessPolicy
from pytriton.frontend.header_forwarding import compile_forward_pattern
from pytriton.frontend.http1 import HttpLimits
from pytriton.frontend.grpc import H2Limits
from pytriton.model_config.common import DynamicBatcher
from pytriton.model_config.datatypes import parse_datatype
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig

logger = logging.getLogger("pytriton.cli")


def parse_tensor(text: str, kind: str) -> TensorSpec:
    """NAME:DTYPE:SHAPE, e.g. INPUT0:int32:16 or TEXT:bytes:-1 or X:FP32:2,3 (shape without batch dim)."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[0]:
        raise click.BadParameter(f"expected NAME:DTYPE:SHAPE (e.g. {kind.upper()}0:int32:16), got '{text}'")
    name, dtype_text, shape_text = parts
    try:
        datatype = parse_datatype(dtype_text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    try:
        shape = tuple(int(d) for d in shape_text.split(",")) if shape_text.strip() else ()
    except ValueError:
        raise click.BadParameter(f"shape of {kind} '{name}' must be comma-separated integers, got '{shape_text}'")
    try:
        return TensorSpec(name, datatype, shape)
    except PyTritonError as exc:
        raise click.BadParameter(str(exc)) from None


def parse_gpus(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        return [int(g) for g in text.split(",") if g.strip()]
    except ValueError:
        raise click.BadParameter(f"--gpus takes comma-separated device ids, got '{text}'") from None


def _tune_malloc() -> None:
    """Re-execute once with glibc malloc tunables: large tensors then reuse heap memory instead of fresh mmaps
    (2.5-3x on 1 MiB paths, see the measurements); GLIBC_TUNABLES set by the user is left alone. Only when
    this process is the `pytriton` program itself (never inside another program that calls `main`)."""
    tunables = _env.malloc_tunables()
    if tunables is None:
        return
    main_module = sys.modules.get("__main__")
    spec = getattr(main_module, "__spec__", None)
    if not (os.path.basename(sys.argv[0]) == "pytriton" or (spec is not None and spec.name == "pytriton.cli")):
        return
    env = dict(os.environ, GLIBC_TUNABLES=tunables)
    try:
        os.execve(sys.executable, [sys.executable, "-m", "pytriton.cli", *sys.argv[1:]], env)
    except OSError:
        pass  # keep running untuned


def check_target(text: str) -> CallableTarget:
    """The callable's import path, checked without importing it: the worker processes import it (and a callable
    that fails to import stops the server at start with their error)."""
    try:
        target = CallableTarget.parse(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="MODULE:CALLABLE") from None
    try:
        find_module(target.module)
    except Exception as exc:  # noqa: BLE001 - a parent package that fails to import is the user's to see too
        raise click.ClickException(f"cannot load '{text}': {type(exc).__name__}: {exc}") from None
    return target


@click.group()
@click.version_option(package_name="pytriton")
def main() -> None:
    """pytriton: a Triton-compatible inference server for Python callables."""


@main.command()
@click.argument("target", metavar="MODULE:CALLABLE")
@click.option("--model-name", help="Name of the model (default: the callable's name, the last part of CALLABLE).")
@click.option("--model-version", type=int, default=1, show_default=True)
@click.option("--input", "inputs", multiple=True, metavar="NAME:DTYPE:SHAPE", help="Model input; repeatable.")
@click.option("--output", "outputs", multiple=True, metavar="NAME:DTYPE:SHAPE", help="Model output; repeatable.")
@click.option("--max-batch-size", type=click.IntRange(min=0), default=0, show_default=True, help="0 = no batching.")
@click.option("--dynamic-batching", is_flag=True,
              help="Merge queued requests into batches of up to --max-batch-size (Triton's dynamic batcher).")
@click.option("--max-queue-delay-us", type=click.IntRange(min=0), default=0, show_default=True,
              help="With --dynamic-batching: how long a request may wait for others to join its batch.")
@click.option("--preferred-batch-size", type=click.IntRange(min=1), multiple=True,
              help="With --dynamic-batching: batch sizes to aim for (repeatable).")
@click.option("--instances", type=click.IntRange(min=1), default=1, show_default=True, help="Instances per GPU (or CPU).")
@click.option("--gpus", help="Comma-separated GPU ids; each gets --instances workers.")
@click.option("--decoupled", is_flag=True, help="The callable is a generator yielding any number of responses per "
              "request (streamed over gRPC ModelStreamInfer).")
@click.option("--grpc-address", default="0.0.0.0", show_default=True)
@click.option("--grpc-port", type=click.IntRange(0, 65535), default=8001, show_default=True, help="0 = any free port.")
@click.option("--http-address", default="0.0.0.0", show_default=True)
@click.option("--http-port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="0 = any free port.")
@click.option("--metrics-address", default="0.0.0.0", show_default=True)
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=8002, show_default=True, help="0 = any free port.")
@click.option("--allow-grpc/--no-allow-grpc", default=True, show_default=True)
@click.option("--allow-http/--no-allow-http", default=True, show_default=True)
@click.option("--allow-metrics/--no-allow-metrics", default=True, show_default=True)
@click.option("--http-header-forward-pattern", help="Regex; matching HTTP headers are passed to the callable as parameters.")
@click.option("--grpc-header-forward-pattern", help="Regex; matching gRPC metadata is passed to the callable as parameters.")
@click.option("--allow-client-shm/--no-allow-client-shm", default=True, show_default=True,
              help="Let clients register system/CUDA shared-memory regions.")
@click.option("--shm-local-only/--shm-allow-remote", default=True, show_default=True,
              help="Serve shared-memory endpoints (and requests that use regions) only to clients on this host, "
                   "unless 'shared-memory' is restricted with an access token.")
@click.option("--http-restricted-api", multiple=True, metavar="GROUPS:KEY=VALUE",
              help="Require header KEY=VALUE for these endpoint groups over HTTP, e.g. "
                   "'shared-memory,statistics:triton-access-token=SECRET'. Repeatable.")
@click.option("--grpc-restricted-protocol", multiple=True, metavar="GROUPS:KEY=VALUE",
              help="The same for gRPC (clients send the header 'triton-grpc-protocol-KEY'). Repeatable.")
@click.option("--grpc-max-concurrent-streams", type=click.IntRange(min=1), default=H2Limits.max_concurrent_streams,
              show_default=True, help="Streams open at once per gRPC connection; more are refused (REFUSED_STREAM).")
@click.option("--grpc-max-header-list-size", type=click.IntRange(min=1), default=H2Limits.max_header_list_size,
              show_default=True, help="Largest gRPC request header list (metadata), in bytes.")
@click.option("--grpc-max-message-bytes", type=click.IntRange(min=1), default=H2Limits.max_message_bytes,
              show_default=True, help="Largest gRPC request message, as sent and once decompressed.")
@click.option("--grpc-max-decompressed-bytes", type=click.IntRange(min=1), default=H2Limits.max_decompressed_bytes,
              show_default=True, help="Largest gzip/deflate gRPC request message once decompressed.")
@click.option("--grpc-idle-timeout", type=click.FloatRange(min=0), default=H2Limits.idle_timeout_s, show_default=True,
              help="Seconds a gRPC connection without calls stays open (0 = for ever).")
@click.option("--grpc-max-stream-requests-in-flight", type=click.IntRange(min=1),
              default=H2Limits.max_stream_requests_in_flight, show_default=True,
              help="Requests of one ModelStreamInfer stream served at once; the next waits (flow control holds the "
                   "client).")
@click.option("--http-max-input-size", type=click.IntRange(min=1), default=HttpLimits.max_input_bytes,
              show_default=True, help="Largest HTTP request body (after decompression too), in bytes; larger: 413.")
@click.option("--http-max-buffered-bytes", type=click.IntRange(min=1), default=HttpLimits.max_buffered_bytes,
              show_default=True, help="Request body bytes all HTTP connections together may hold in memory; past it "
                                      "connections stop reading until memory frees. HTTP and metrics ports (each).")
@click.option("--http-max-header-size", type=click.IntRange(min=1), default=HttpLimits.max_header_bytes,
              show_default=True, help="Largest HTTP request head (request line and headers), in bytes; larger: 431. "
                                      "HTTP and metrics ports.")
@click.option("--http-max-header-count", type=click.IntRange(min=1), default=HttpLimits.max_header_count,
              show_default=True, help="Most header fields in one HTTP request; more: 431. HTTP and metrics ports.")
@click.option("--http-header-timeout", type=click.FloatRange(min=0, min_open=True), default=HttpLimits.header_timeout_s,
              show_default=True, help="Seconds a request head may take to arrive; later: 408.")
@click.option("--http-body-timeout", type=click.FloatRange(min=0, min_open=True), default=HttpLimits.body_timeout_s,
              show_default=True, help="Seconds a request body (or a client taking its answer) may stall; "
                                      "longer: 408 (or the connection is dropped).")
@click.option("--http-idle-timeout", type=click.FloatRange(min=0, min_open=True), default=HttpLimits.idle_timeout_s,
              show_default=True, help="Seconds a keep-alive HTTP connection may wait for its next request.")
@click.option("--exit-timeout", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds a stop may take in all: in-flight requests finish, then workers exit; what has not "
                   "stopped by then is killed.")
@click.option("--execution-timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="An execution that runs longer fails its requests and its worker is killed and restarted "
                   "(for a streaming model: no response for this long). Default: no limit.")
@click.option("--trace-config", "trace_config", multiple=True, metavar="[MODE,]SETTING=VALUE",
              help="Tracing, as Triton's --trace-config; repeatable: level=TIMESTAMPS, rate=N, count=N, "
                   "mode=triton|opentelemetry, triton,file=PATH, triton,log-frequency=N, opentelemetry,url=URL, "
                   "opentelemetry,resource=KEY=VALUE.")
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
def serve(
    target: str,
    model_name: str | None,
    model_version: int,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    max_batch_size: int,
    dynamic_batching: bool,
    max_queue_delay_us: int,
    preferred_batch_size: tuple[int, ...],
    instances: int,
    gpus: str | None,
    decoupled: bool,
    grpc_address: str,
    grpc_port: int,
    http_address: str,
    http_port: int,
    metrics_address: str,
    metrics_port: int,
    allow_grpc: bool,
    allow_http: bool,
    allow_metrics: bool,
    http_header_forward_pattern: str | None,
    grpc_header_forward_pattern: str | None,
    allow_client_shm: bool,
    shm_local_only: bool,
    http_restricted_api: tuple[str, ...],
    grpc_restricted_protocol: tuple[str, ...],
    grpc_max_concurrent_streams: int,
    grpc_max_header_list_size: int,
    grpc_max_message_bytes: int,
    grpc_max_decompressed_bytes: int,
    grpc_idle_timeout: float,
    grpc_max_stream_requests_in_flight: int,
    http_max_input_size: int,
    http_max_buffered_bytes: int,
    http_max_header_size: int,
    http_max_header_count: int,
    http_header_timeout: float,
    http_body_timeout: float,
    http_idle_timeout: float,
    exit_timeout: float,
    execution_timeout: float | None,
    trace_config: tuple[str, ...],
    log_level: str,
) -> None:
    """Serve the inference callable MODULE:CALLABLE over Triton's gRPC and HTTP protocols."""
    log_level = log_level.upper()
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    callable_target = check_target(target)
    input_specs = [parse_tensor(t, "input") for t in inputs]
    output_specs = [parse_tensor(t, "output") for t in outputs]
    if not output_specs:
        raise click.UsageError("at least one --output NAME:DTYPE:SHAPE is required")
    name = model_name or callable_target.name
    try:
        config = TritonModelConfig(
            model_name=name,
            model_version=model_version,
            inputs=input_specs,
            outputs=output_specs,
            max_batch_size=max_batch_size,
            instance_count=instances,
            gpus=parse_gpus(gpus),
            decoupled=decoupled,
            batcher=DynamicBatcher(max_queue_delay_microseconds=max_queue_delay_us,
                                   preferred_batch_size=list(preferred_batch_size) or None)
            if dynamic_batching else None,
        )
    except PyTritonError as exc:
        raise click.UsageError(str(exc)) from None
    if dynamic_batching and max_batch_size == 0:
        raise click.UsageError("--dynamic-batching needs --max-batch-size > 0")
    if not (allow_grpc or allow_http):
        raise click.UsageError("at least one of gRPC and HTTP must be allowed")
    for option, pattern in (("--http-header-forward-pattern", http_header_forward_pattern),
                            ("--grpc-header-forward-pattern", grpc_header_forward_pattern)):
        if pattern:
            try:
                compile_forward_pattern(pattern)
            except re.error as exc:
                raise click.BadParameter(f"invalid regular expression: {exc}", param_hint=option) from None
    for option, specs in (("--http-restricted-api", http_restricted_api),
                          ("--grpc-restricted-protocol", grpc_restricted_protocol)):
        try:
            AccessPolicy.from_specs(list(specs))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=option) from None
    try:
        parse_trace_config(trace_config)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--trace-config") from None
    _tune_malloc()
    try:
        server_config = ServerConfig.from_env(
            models=[ModelSpec(config, str(callable_target))],
            allow_grpc=allow_grpc,
            grpc_address=grpc_address,
            grpc_port=grpc_port,
            grpc_header_forward_pattern=grpc_header_forward_pattern,
            grpc_limits=H2Limits(max_concurrent_streams=grpc_max_concurrent_streams,
                                 max_header_list_size=grpc_max_header_list_size,
                                 max_message_bytes=grpc_max_message_bytes,
                                 max_decompressed_bytes=grpc_max_decompressed_bytes,
                                 idle_timeout_s=grpc_idle_timeout or None,
                                 max_stream_requests_in_flight=grpc_max_stream_requests_in_flight),
            allow_http=allow_http,
            http_address=http_address,
            http_port=http_port,
            http_header_forward_pattern=http_header_forward_pattern,
            http_limits=HttpLimits(
                max_input_bytes=http_max_input_size,
                max_buffered_bytes=http_max_buffered_bytes,
                max_header_bytes=http_max_header_size,
                max_header_count=http_max_header_count,
                header_timeout_s=http_header_timeout,
                body_timeout_s=http_body_timeout,
                idle_timeout_s=http_idle_timeout,
            ),
            allow_metrics=allow_metrics,
            allow_client_shm=allow_client_shm,
            shm_local_only=shm_local_only,
            http_restricted_api=list(http_restricted_api),
            grpc_restricted_protocol=list(grpc_restricted_protocol),
            metrics_address=metrics_address,
            metrics_port=metrics_port,
            log_level=log_level,
            exit_timeout_s=exit_timeout,
            execution_timeout_s=execution_timeout,
            trace_config=list(trace_config),
        )
    except ValueError as exc:  # an environment variable with a bad value
        raise click.ClickException(str(exc)) from None
    try:
        run(server_config)
    except (OSError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from None


if __name__ == "__main__":
    main()
