"""`pytriton serve module:infer_fn ...` — a thin shell over `pytriton.server`."""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any

import click

from pytriton.backends.target import CallableTarget, find_module
from pytriton.cli.grpc_options import grpc_limit_options
from pytriton.cli.model import ModelFlags, build_model_config, describe_target, parse_tensor
from pytriton.cli.openai_options import openai_options
from pytriton.cli.platform_options import platform_options
from pytriton.cli.queue_options import queue_policy_options
from pytriton.cli.sequence_options import CONTROL_HELP, STATE_HELP, sequence_batcher_of
from pytriton.cli.tls_options import tls_options
from pytriton.config.cache import parse_cache_config
from pytriton.config.metrics import MetricsSettings
from pytriton.config.platforms import vertex_ai_mode
from pytriton.config.repository_limits import RepositoryLimits
from pytriton.config.server import (
    DEFAULT_BACKEND_DIRECTORY,
    DEFAULT_METRICS_INTERVAL_MS,
    DEFAULT_SERVER_ID,
    ModelSpec,
    ServerConfig,
)
from pytriton.config.tls import TlsSettings
from pytriton.config.trace import parse_trace_config
from pytriton.exceptions import PyTritonError
from pytriton.frontend.access import AccessPolicy
from pytriton.frontend.grpc import H2Limits
from pytriton.frontend.header_forwarding import compile_forward_pattern
from pytriton.frontend.http1 import HttpLimits
from pytriton.repository import ModelRepositoryError, load_repositories, scan_repositories
from pytriton.repository.control import DEFAULT_POLL_SECS, MODES
from pytriton.server.frontend_group import refusal, run_group
from pytriton.server.process import run

logger = logging.getLogger("pytriton.cli")


def _log_to(path: str) -> None:
    """Standard error (this process's, and so the workers' it starts) appended to `path` from here on."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise click.BadParameter(f"cannot open '{path}': {exc.strerror}", param_hint="--log-file") from None
    sys.stderr.flush()
    os.dup2(fd, 2)
    os.close(fd)


def check_target(text: str) -> CallableTarget:
    """The callable's import path (a file path made absolute), checked without importing it: only child processes
    import it (the one that reads its declaration, then the workers)."""
    try:
        target = CallableTarget.parse(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="MODULE:CALLABLE") from None
    if target.is_file:
        if not os.path.isfile(target.module):
            where = os.path.abspath(target.module)
            raise click.ClickException(f"cannot load '{text}': no such file '{target.module}' ({where})")
        return target.absolute()
    try:
        find_module(target.module)
    except Exception as exc:  # noqa: BLE001 - a parent package that fails to import is the user's to see too
        raise click.ClickException(f"cannot load '{text}': {type(exc).__name__}: {exc}") from None
    return target


def _repository_models(folders: tuple[str, ...], auto_complete: bool,
                       refused: dict[str, tuple[int | None, str]] | None, backend_directory: str) -> list[ModelSpec]:
    """The models of the --model-repository folders; a repository or config that cannot be served stops the start,
    or with `refused` (--exit-on-error false) a model that cannot is put there and the others are served."""
    try:
        return [ModelSpec(m.config, m.target)
                for m in load_repositories(folders, auto_complete, refused, backend_directory)]
    except ModelRepositoryError as exc:
        raise click.ClickException(str(exc)) from None


def _repository_names(folders: tuple[str, ...]) -> set[str]:
    """The model names of the --model-repository folders. (A --load-model name that is none of them is the server's
    to refuse, as Triton's: logged, then "failed to load all models" with --exit-on-error.)"""
    try:
        return set(scan_repositories(folders))
    except ModelRepositoryError as exc:
        raise click.ClickException(str(exc)) from None


@click.group()
@click.version_option(package_name="pytriton")
def main() -> None:
    """pytriton: a Triton-compatible inference server for Python callables."""


@main.command()
@click.argument("target", metavar="[MODULE:CALLABLE]", required=False)
@click.option("--model-repository", "model_repositories", multiple=True, metavar="DIR",
              help="A Triton model repository (<model>/config.pbtxt, <model>/<version>/model.py) whose Python-backend "
                   "models are served (see --model-control-mode); repeatable. Serves beside MODULE:CALLABLE when "
                   "both are given.")
@click.option("--model-control-mode", type=click.Choice(list(MODES)), default="none", show_default=True,
              help="Triton's model control mode for --model-repository: none (every model loaded at start), explicit "
                   "(--load-model at start, then load/unload over the repository extension) or poll (every model "
                   "loaded; the repositories rescanned every --repository-poll-secs for new, changed and removed "
                   "models).")
@click.option("--load-model", "load_models", multiple=True, metavar="NAME",
              help="Model control mode explicit: a repository model to load at start; repeatable; '*' loads all.")
@click.option("--repository-poll-secs", type=click.IntRange(min=1), default=DEFAULT_POLL_SECS, show_default=True,
              help="Model control mode poll: seconds between two scans of the model repositories.")
@click.option("--backend-directory", default=DEFAULT_BACKEND_DIRECTORY, show_default=True, metavar="DIR",
              help="As Triton's: where Python-based backends are. A repository model whose config.pbtxt names a "
                   "backend other than python (backend: \"NAME\") runs DIR/NAME/model.py, a TritonPythonModel shared "
                   "by every model of that backend (e.g. Triton's vllm backend); its version folders hold what it "
                   "reads.")
@click.option("--disable-auto-complete-config", is_flag=True, default=False,
              help="Do not let repository models complete their configuration (TritonPythonModel."
                   "auto_complete_config); every model then needs a complete config.pbtxt. As Triton's option.")
@click.option("--strict-model-config", type=click.BOOL, default=None, metavar="BOOLEAN",
              help="Deprecated in Triton, kept for its users: true is --disable-auto-complete-config, false (the "
                   "default) leaves auto-complete on.")
@click.option("--allow-model-upload/--no-allow-model-upload", default=False, show_default=True,
              help="Model control mode explicit: let a load request give the model's files ('file:' parameters, e.g. "
                   "file:1/model.py), which the server then runs. Off by default: only the repositories' models "
                   "load. Restrict the model-repository group with a token when you turn it on (docs/security.md).")
@click.option("--model-config-max-size", type=click.IntRange(min=1), default=RepositoryLimits.max_config_bytes,
              show_default=True, metavar="BYTES",
              help="Largest configuration override (a load request's 'config' parameter, JSON), in bytes.")
@click.option("--model-upload-max-size", type=click.IntRange(min=1), default=RepositoryLimits.max_upload_bytes,
              show_default=True, metavar="BYTES",
              help="With --allow-model-upload: the most bytes one load's files may hold together.")
@click.option("--model-name", help="Name of the model (default: the declared name, else the callable's name, the "
              "last part of CALLABLE).")
@click.option("--model-version", type=click.IntRange(min=0), default=1, show_default=True,
              help="The version the model is served as (/v2/models/NAME/versions/N).")
@click.option("--input", "inputs", multiple=True, metavar="NAME:DTYPE:SHAPE",
              help="Model input; repeatable. Replaces the declared inputs.")
@click.option("--output", "outputs", multiple=True, metavar="NAME:DTYPE:SHAPE",
              help="Model output; repeatable. Replaces the declared outputs.")
@click.option("--max-batch-size", type=click.IntRange(min=0), default=None,
              help="0 = no batching. Default: the declared one, else 0.")
@click.option("--dynamic-batching/--no-dynamic-batching", default=None,
              help="Merge queued requests into batches of up to --max-batch-size (Triton's dynamic batcher). "
                   "Default: as declared, else off.")
@click.option("--max-queue-delay-us", type=click.IntRange(min=0), default=None,
              help="Dynamic batcher: how long a request may wait for others to join its batch. Like Triton's "
                   "dynamic_batching setting, it turns dynamic batching on (needs --max-batch-size > 0). "
                   "Default: the declared one, else 0.")
@click.option("--preferred-batch-size", type=click.IntRange(min=1), multiple=True,
              help="Dynamic batcher: a batch size to aim for, at most --max-batch-size (repeatable). Turns dynamic "
                   "batching on, as --max-queue-delay-us does.")
@queue_policy_options
@click.option("--sequence-batching", type=click.Choice(["direct", "oldest"]), default=None,
              help="Serve a stateful model with Triton's sequence batcher: requests grouped by sequence_id, each "
                   "sequence on one instance (direct: a batch slot per sequence; oldest: the oldest requests of "
                   "--max-candidate-sequences sequences batched, with --preferred-batch-size / --max-queue-delay-us).")
@click.option("--sequence-control", "sequence_controls", multiple=True, metavar="KIND=NAME[:DTYPE[:FALSE,TRUE]]",
              help="Sequence batcher: a control input the model reads (repeatable). " + CONTROL_HELP + ".")
@click.option("--sequence-state", "sequence_states", multiple=True, metavar="INPUT=OUTPUT:DTYPE:SHAPE[:FILE]",
              help="Sequence batcher: implicit state (repeatable). " + STATE_HELP + ".")
@click.option("--sequence-idle-us", type=click.IntRange(min=1), default=None,
              help="Sequence batcher: max_sequence_idle_microseconds (default 1000000).")
@click.option("--max-candidate-sequences", type=click.IntRange(min=1), default=None,
              help="Sequence batcher, oldest: sequences an instance holds at once (default 1).")
@click.option("--instances", type=click.IntRange(min=1), default=None,
              help="Instances per GPU (or CPU). Default: the declared count, else 1.")
@click.option("--gpus", metavar="IDS|all", help="Comma-separated ids of visible GPUs (as numbered after "
              "CUDA_VISIBLE_DEVICES), or 'all'; each gets --instances workers, pinned with CUDA_VISIBLE_DEVICES. "
              "Default: every visible GPU for a model declared with device='gpu' (or --device gpu), else CPU "
              "instances.")
@click.option("--device", type=click.Choice(["cpu", "gpu"]), default=None,
              help="The kind of device the model runs on; replaces the declared device='...'. gpu without --gpus: "
                   "every visible GPU. Default: the declared one, else cpu.")
@click.option("--decoupled/--no-decoupled", default=None,
              help="The callable is a generator yielding any number of responses per request (streamed over gRPC "
                   "ModelStreamInfer). Default: as declared, else off.")
@click.option("--response-cache/--no-response-cache", default=None,
              help="Answer identical requests from the server's response cache (config.pbtxt's response_cache "
                   "{ enable: true }); needs --cache-config. Default: as declared, else off.")
@click.option("--cache-config", multiple=True, metavar="local,size=BYTES",
              help="As Triton's: the server's response cache, an LRU of responses bounded in bytes "
                   "(local,size=1048576). Models enable it with response_cache.")
@click.option("--grpc-address", default="0.0.0.0", show_default=True)
@click.option("--grpc-port", type=click.IntRange(0, 65535), default=8001, show_default=True, help="0 = any free port.")
@click.option("--http-address", default="0.0.0.0", show_default=True)
@click.option("--http-port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="0 = any free port.")
@click.option("--metrics-address", default="0.0.0.0", show_default=True)
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=8002, show_default=True, help="0 = any free port.")
@click.option("--metrics-config", multiple=True, metavar="KEY=VALUE",
              help="As Triton's: summary_latencies=true adds the nv_inference_*_summary_us quantiles (last minute), "
                   "summary_quantiles=0.5:0.05,0.99:0.001 picks them, histogram_latencies=true adds "
                   "nv_inference_first_response_histogram_ms (decoupled models), counter_latencies=false drops the "
                   "*_duration_us counters. Repeatable.")
@click.option("--allow-grpc/--no-allow-grpc", default=None, show_default="true; false if AIP_MODE=PREDICTION")
@click.option("--allow-http/--no-allow-http", default=None, show_default="true; false if AIP_MODE=PREDICTION")
@click.option("--allow-metrics/--no-allow-metrics", default=True, show_default=True)
@click.option("--allow-gpu-metrics/--no-allow-gpu-metrics", default=True, show_default=True,
              help="Export nv_gpu_* metrics of the visible GPUs (through NVML) when there are any.")
@click.option("--allow-cpu-metrics/--no-allow-cpu-metrics", default=True, show_default=True,
              help="Export the nv_cpu_utilization and nv_cpu_memory_* gauges.")
@click.option("--metrics-interval-ms", type=click.FloatRange(min=0, min_open=True),
              default=DEFAULT_METRICS_INTERVAL_MS, show_default=True,
              help="As Triton's: the CPU and GPU gauges are read at most once per interval; scrapes in between see "
                   "the last reading (counters are exact at every scrape).")
@click.option("--id", "server_id", default=DEFAULT_SERVER_ID, show_default=True,
              help="As Triton's: the server's name in its metadata (GET /v2, gRPC ServerMetadata).")
@click.option("--exit-on-error", type=click.BOOL, default=True, show_default=True, metavar="BOOLEAN",
              help="As Triton's: a model that fails to load at start stops the start; false: the server starts and "
                   "the model is UNAVAILABLE with its reason (see the repository index).")
@click.option("--strict-readiness", type=click.BOOL, default=True, show_default=True, metavar="BOOLEAN",
              help="As Triton's: /v2/health/ready is ready only when every model is ready; false: whenever the "
                   "server is up.")
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
@grpc_limit_options
@click.option("--http-max-input-size", type=click.IntRange(min=1), default=HttpLimits.max_input_bytes,
              show_default=True, help="Largest HTTP request body (after decompression too), in bytes; larger: 413.")
@click.option("--http-max-buffered-bytes", type=click.IntRange(min=1), default=HttpLimits.max_buffered_bytes,
              show_default=True, help="Request body bytes all HTTP connections together may hold in memory; past it "
                                      "connections stop reading until memory frees. HTTP and metrics ports (each).")
@click.option("--http-max-header-size", type=click.IntRange(min=1), default=HttpLimits.max_header_bytes,
              show_default=True, help="Largest HTTP request head (request line and headers), and chunked body "
                                      "framing (a size line; the trailer fields), in bytes; larger: 431. HTTP and "
                                      "metrics ports.")
@click.option("--http-max-header-count", type=click.IntRange(min=1), default=HttpLimits.max_header_count,
              show_default=True, help="Most header fields in one HTTP request; more: 431. HTTP and metrics ports.")
@click.option("--http-header-timeout", type=click.FloatRange(min=0, min_open=True), default=HttpLimits.header_timeout_s,
              show_default=True, help="Seconds a request head may take to arrive; later: 408.")
@click.option("--http-body-timeout", type=click.FloatRange(min=0, min_open=True), default=HttpLimits.body_timeout_s,
              show_default=True, help="Seconds a request body (or a client taking its answer) may stall; "
                                      "longer: 408 (or the connection is dropped).")
@click.option("--http-idle-timeout", type=click.FloatRange(min=0, min_open=True), default=HttpLimits.idle_timeout_s,
              show_default=True, help="Seconds a keep-alive HTTP connection may wait for its next request.")
@tls_options
@click.option("--exit-timeout", "--exit-timeout-secs", "exit_timeout", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds a stop may take in all: in-flight requests finish, then workers exit; what has not "
                   "stopped by then is killed.")
@click.option("--frontend-processes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Server processes sharing the gRPC and HTTP ports (SO_REUSEPORT), each with its own scheduler "
                   "and --instances workers; statistics and metrics are summed over them. See docs/multi-frontend.md "
                   "for what more than 1 refuses.")
@click.option("--execution-timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="An execution that runs longer fails its requests and its worker is killed and restarted "
                   "(for a streaming model: no response for this long). Default: no limit.")
@click.option("--trace-config", "trace_config", multiple=True, metavar="[MODE,]SETTING=VALUE",
              help="Tracing, as Triton's --trace-config; repeatable: level=TIMESTAMPS, rate=N, count=N, "
                   "mode=triton|opentelemetry, triton,file=PATH, triton,log-frequency=N, opentelemetry,url=URL, "
                   "opentelemetry,resource=KEY=VALUE.")
@platform_options
@openai_options
@click.option("--log-file", type=click.Path(dir_okay=False, writable=True), default=None, metavar="PATH",
              help="As Triton's: the server's log (and its workers', everything written to standard error once the "
                   "options are checked) is appended to this file instead.")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    help="Least severe messages logged (any case).",
)
def serve(
    target: str | None,
    model_repositories: tuple[str, ...],
    model_control_mode: str,
    load_models: tuple[str, ...],
    repository_poll_secs: int,
    backend_directory: str,
    disable_auto_complete_config: bool,
    strict_model_config: bool | None,
    allow_model_upload: bool,
    model_config_max_size: int,
    model_upload_max_size: int,
    model_name: str | None,
    model_version: int,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    max_batch_size: int | None,
    dynamic_batching: bool | None,
    max_queue_delay_us: int | None,
    preferred_batch_size: tuple[int, ...],
    queue_policy: dict[str, Any],
    sequence_batching: str | None,
    sequence_controls: tuple[str, ...],
    sequence_states: tuple[str, ...],
    sequence_idle_us: int | None,
    max_candidate_sequences: int | None,
    instances: int | None,
    gpus: str | None,
    device: str | None,
    decoupled: bool | None,
    response_cache: bool | None,
    cache_config: tuple[str, ...],
    grpc_address: str,
    grpc_port: int,
    http_address: str,
    http_port: int,
    metrics_address: str,
    metrics_port: int,
    metrics_config: tuple[str, ...],
    allow_grpc: bool | None,
    allow_http: bool | None,
    allow_metrics: bool,
    allow_gpu_metrics: bool,
    allow_cpu_metrics: bool,
    metrics_interval_ms: float,
    server_id: str,
    exit_on_error: bool,
    strict_readiness: bool,
    http_header_forward_pattern: str | None,
    grpc_header_forward_pattern: str | None,
    allow_client_shm: bool,
    shm_local_only: bool,
    http_restricted_api: tuple[str, ...],
    grpc_restricted_protocol: tuple[str, ...],
    grpc_limits: H2Limits,
    http_max_input_size: int,
    http_max_buffered_bytes: int,
    http_max_header_size: int,
    http_max_header_count: int,
    http_header_timeout: float,
    http_body_timeout: float,
    http_idle_timeout: float,
    grpc_tls: TlsSettings | None,
    http_tls: TlsSettings | None,
    openai_tls: TlsSettings | None,
    exit_timeout: float,
    frontend_processes: int,
    execution_timeout: float | None,
    trace_config: tuple[str, ...],
    log_file: str | None,
    log_level: str,
    platforms: dict[str, Any],
    openai: dict[str, Any],
) -> None:
    """Serve the inference callable MODULE:CALLABLE (or path/to/file.py:CALLABLE) over Triton's gRPC and HTTP
    protocols. CALLABLE may be a class (an instance per worker) or Class.method. The model's tensors and settings
    come from its @triton_model declaration, overridden by the flags. With --model-repository DIR, the Python-backend
    models of a Triton model repository are served (beside the callable, or alone)."""
    log_level = log_level.upper()
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    input_specs = [parse_tensor(t, "input") for t in inputs]
    output_specs = [parse_tensor(t, "output") for t in outputs]
    if target is None and not model_repositories:
        raise click.UsageError("give the inference callable MODULE:CALLABLE, --model-repository DIR, or both")
    if target is None and (inputs or outputs or model_name):
        raise click.UsageError("--model-name, --input and --output describe MODULE:CALLABLE, which is not given")
    callable_target = check_target(target) if target is not None else None
    flags = ModelFlags(model_name=model_name, model_version=model_version, inputs=input_specs, outputs=output_specs,
                       max_batch_size=max_batch_size, dynamic_batching=dynamic_batching,
                       max_queue_delay_us=max_queue_delay_us, preferred_batch_size=preferred_batch_size,
                       queue_policy=queue_policy,
                       instances=instances, gpus=gpus, device=device,
                       decoupled=decoupled, response_cache=response_cache, sequence_batcher=sequence_batcher_of(
                           sequence_batching, sequence_controls, sequence_idle_us, max_candidate_sequences,
                           max_queue_delay_us, preferred_batch_size, sequence_states))
    if allow_grpc is None or allow_http is None:  # Triton: off by default in a Vertex AI prediction container
        default = not _platform_mode(platforms)
        allow_grpc = default if allow_grpc is None else allow_grpc
        allow_http = default if allow_http is None else allow_http
    if not (allow_grpc or allow_http or platforms["allow_sagemaker"] or platforms["allow_vertex_ai"]):
        raise click.UsageError("at least one of gRPC and HTTP must be allowed (or SageMaker or Vertex AI)")
    for option, pattern in (("--http-header-forward-pattern", http_header_forward_pattern),
                            ("--grpc-header-forward-pattern", grpc_header_forward_pattern)):
        if pattern:
            try:
                compile_forward_pattern(pattern)
            except re.error as exc:
                raise click.BadParameter(f"invalid regular expression: {exc}", param_hint=option) from None
    for option, specs, kind in (("--http-restricted-api", http_restricted_api, "api"),
                                ("--grpc-restricted-protocol", grpc_restricted_protocol, "protocol")):
        try:
            AccessPolicy.from_specs(list(specs), kind=kind)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=option) from None
    try:
        MetricsSettings.parse(metrics_config)
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix("--metrics-config: "), param_hint="--metrics-config") from None
    try:
        parse_cache_config(cache_config)
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix("--cache-config: "), param_hint="--cache-config") from None
    try:
        parse_trace_config(trace_config)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--trace-config") from None
    if load_models and model_control_mode != "explicit":
        raise click.UsageError("Use of '--load-model' requires setting '--model-control-mode=explicit' as well.")
    if allow_model_upload and model_control_mode != "explicit":  # (loads are refused in the other modes)
        raise click.UsageError("Use of '--allow-model-upload' requires setting '--model-control-mode=explicit' as "
                               "well.")
    if model_control_mode != "none" and not model_repositories:
        raise click.UsageError(f"--model-control-mode {model_control_mode} needs --model-repository DIR")
    if log_file:
        _log_to(log_file)
    repository_names = _repository_names(model_repositories)
    auto_complete = not (disable_auto_complete_config or strict_model_config)
    refused: dict[str, tuple[int | None, str]] = {}
    models = _repository_models(model_repositories, auto_complete, None if exit_on_error else refused,
                                backend_directory) if model_control_mode == "none" else []
    if callable_target is not None:
        config = build_model_config(callable_target, describe_target(callable_target), flags)
        if config.model_name in repository_names:
            raise click.UsageError(f"model '{config.model_name}' of {callable_target} is also in a model repository; "
                                   "give it another name with --model-name")
        models.insert(0, ModelSpec(config, str(callable_target)))
    try:
        server_config = ServerConfig.from_env(
            models=models,
            allow_grpc=allow_grpc,
            grpc_address=grpc_address,
            grpc_port=grpc_port,
            grpc_header_forward_pattern=grpc_header_forward_pattern,
            grpc_limits=grpc_limits,
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
            allow_gpu_metrics=allow_gpu_metrics,
            allow_cpu_metrics=allow_cpu_metrics,
            metrics_interval_ms=metrics_interval_ms,
            server_id=server_id,
            exit_on_error=exit_on_error,
            strict_readiness=strict_readiness,
            allow_client_shm=allow_client_shm,
            shm_local_only=shm_local_only,
            http_restricted_api=list(http_restricted_api),
            grpc_restricted_protocol=list(grpc_restricted_protocol),
            metrics_address=metrics_address,
            metrics_port=metrics_port,
            metrics_config=list(metrics_config),
            cache_config=list(cache_config),
            log_level=log_level,
            exit_timeout_s=exit_timeout,
            execution_timeout_s=execution_timeout,
            trace_config=list(trace_config),
            model_repositories=list(model_repositories) if model_control_mode != "none" else [],
            model_control_mode=model_control_mode,
            refused_models=refused,
            backend_directory=backend_directory,
            load_models=list(load_models),
            repository_poll_secs=float(repository_poll_secs),
            auto_complete_config=auto_complete,
            allow_model_upload=allow_model_upload,
            repository_limits=RepositoryLimits(max_config_bytes=model_config_max_size,
                                               max_upload_bytes=model_upload_max_size),
            **platforms,
            **openai,
            grpc_tls=grpc_tls,
            http_tls=http_tls,
            openai_tls=openai_tls,
        )
    except ValueError as exc:  # an environment variable with a bad value
        raise click.ClickException(str(exc)) from None
    problem = refusal(server_config, frontend_processes)
    if problem is not None:
        raise click.BadParameter(f"{frontend_processes} processes: {problem}", param_hint="--frontend-processes")
    try:
        run_group(server_config, frontend_processes) if frontend_processes > 1 else run(server_config)
    except (OSError, RuntimeError, PyTritonError) as exc:
        raise click.ClickException(str(exc)) from None



def _platform_mode(platforms: dict[str, Any]) -> bool:
    """AIP_MODE=PREDICTION (Triton then turns HTTP and gRPC off unless they are allowed explicitly)."""
    return vertex_ai_mode(os.environ)

