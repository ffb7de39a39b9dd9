"""What each `TritonConfig` field does on this server: the single source of the reasons logged for fields that are
accepted without effect and of the reference page's table (docs/guide/triton-config.md,
kept equal to `reference_table()` by tests/triton/test_config_fields.py).

`python -m pytriton.config.triton_config_fields` prints the table.
"""

from __future__ import annotations

import dataclasses

APPLIED = "applied"
IGNORED = "ignored"  # accepted (so configurations keep working), logged once, no effect


@dataclasses.dataclass(frozen=True)
class FieldInfo:
    status: str
    cli: str  # the `pytriton serve` option ("" where there is none)
    reason: str  # what it does here (applied) or why it has no effect (ignored)


def _applied(cli: str, what: str) -> FieldInfo:
    return FieldInfo(APPLIED, cli, what)


def _ignored(reason: str, cli: str = "") -> FieldInfo:
    return FieldInfo(IGNORED, cli, reason)


_TLS = "(tls.md)"

FIELDS: dict[str, FieldInfo] = {
    "model_repository": _applied(
        "--model-repository", "a Triton model repository whose Python-backend models the server serves beside the "
        "bound ones (loaded at start, as Triton's model control mode none)"),
    "allow_model_upload": _applied(
        "--allow-model-upload", "pytriton's own: true lets a load request give the model's files (`file:` "
        "parameters), which the server then runs; false (default): such a load is refused naming this option. Only "
        "model control mode explicit takes loads, and Triton() serves model_repository in mode none, where every "
        "load is refused: it is here for configurations shared with `pytriton serve` (security.md)"),
    "id": _applied("--id", "the server's name in its metadata (`GET /v2`, gRPC ServerMetadata `name`); default "
                   "\"triton\""),
    "log_verbose": _applied("--log-level", "the server's log level: 0 or unset warning, 1 info, 2 or more debug (the CLI "
                            "names the level instead)"),
    "log_file": _applied("--log-file", "the server's log (its standard error and its workers') is appended to this "
                         "file instead of this process's standard error"),
    "exit_timeout_secs": _applied("--exit-timeout-secs", "seconds a stop may take in all: in-flight requests finish, "
                                  "then workers exit; default 30"),
    "execution_timeout_secs": _applied("--execution-timeout", "pytriton's own: an execution that runs longer fails "
                                       "its requests and its worker is restarted"),
    "exit_on_error": _applied("--exit-on-error", "true (default): a repository model that fails to load at start "
                              "stops the start; false: the server starts and the model is UNAVAILABLE with its "
                              "reason. A bound model that fails to load fails bind()/run() in any case"),
    "strict_readiness": _applied("--strict-readiness", "true (default): /v2/health/ready (gRPC ServerReady) is ready "
                                 "only when every model is ready (a model unloaded on request does not count); "
                                 "false: ready whenever the server is up"),
    "allow_http": _applied("--allow-http", "serve the HTTP/REST endpoint"),
    "http_address": _applied("--http-address", "the HTTP endpoint's address"),
    "http_port": _applied("--http-port", "the HTTP endpoint's port (0: any free port, see `Triton.ports`)"),
    "http_header_forward_pattern": _applied("--http-header-forward-pattern", "HTTP headers matching this regex reach "
                                            "the callable as request parameters"),
    "http_thread_count": _ignored("HTTP is served by the server process's event loop; there is no HTTP thread pool "
                                  "to size"),
    "http_restricted_api": _applied("--http-restricted-api", "endpoint groups that need a header KEY=VALUE over "
                                    "HTTP (GROUPS:KEY=VALUE)"),
    "allow_grpc": _applied("--allow-grpc", "serve the gRPC endpoint"),
    "grpc_address": _applied("--grpc-address", "the gRPC endpoint's address"),
    "grpc_port": _applied("--grpc-port", "the gRPC endpoint's port (0: any free port)"),
    "grpc_header_forward_pattern": _applied("--grpc-header-forward-pattern", "gRPC metadata matching this regex "
                                            "reaches the callable as request parameters"),
    "grpc_infer_allocation_pool_size": _ignored("the gRPC front-end keeps no pool of request/response objects for "
                                                "reuse; there is nothing to size"),
    "grpc_use_ssl": _applied("--grpc-use-ssl", f"serve gRPC over TLS 1.2+ with grpc_server_cert and grpc_server_key "
                             f"{_TLS}"),
    "grpc_use_ssl_mutual": _applied("--grpc-use-ssl-mutual", "mutual TLS on gRPC: clients must present a certificate "
                                    f"signed by grpc_root_cert; implies grpc_use_ssl {_TLS}"),
    "grpc_server_cert": _applied("--grpc-server-cert", "the gRPC server's certificate (chain), PEM; checked at start"),
    "grpc_server_key": _applied("--grpc-server-key", "the gRPC server's private key, PEM; checked at start"),
    "grpc_root_cert": _applied("--grpc-root-cert", "mutual TLS: the CA certificate(s) gRPC client certificates are "
                               "verified against, PEM"),
    "grpc_infer_response_compression_level": _applied(
        "--grpc-infer-response-compression-level", "none (default), low, medium, high: ModelInfer/ModelStreamInfer "
        "responses gzip-compressed (zlib level 1/6/9) for clients that accept gzip (grpc-connections.md)"),
    "grpc_keepalive_time": _applied("--grpc-keepalive-time", "ms without activity before the server PINGs the "
                                    "client; default 7200000 (grpc-connections.md)"),
    "grpc_keepalive_timeout": _applied("--grpc-keepalive-timeout", "ms the server waits for its PING's "
                                       "acknowledgement before closing the connection; default 20000"),
    "grpc_keepalive_permit_without_calls": _applied("--grpc-keepalive-permit-without-calls", "keepalive PINGs "
                                                    "(both ways) allowed on a connection with no call; default false"),
    "grpc_http2_max_pings_without_data": _applied("--grpc-http2-max-pings-without-data", "PINGs the server sends "
                                                  "with no data sent in between (0: no limit); default 2"),
    "grpc_http2_min_recv_ping_interval_without_data": _applied(
        "--grpc-http2-min-recv-ping-interval-without-data", "ms a client must leave between PINGs with no data "
        "sent; a sooner PING is a strike; default 300000"),
    "grpc_http2_max_ping_strikes": _applied("--grpc-http2-max-ping-strikes", "strikes before GOAWAY "
                                            "ENHANCE_YOUR_CALM too_many_pings (0: no limit); default 2"),
    "grpc_restricted_protocol": _applied("--grpc-restricted-protocol", "endpoint groups that need a header "
                                         "KEY=VALUE over gRPC (`triton-grpc-protocol-KEY`)"),
    "http_use_ssl": _applied("--http-use-ssl", "pytriton's own (Triton has no HTTP TLS): serve HTTP over TLS with "
                             f"http_server_cert and http_server_key {_TLS}"),
    "http_use_ssl_mutual": _applied("--http-use-ssl-mutual", "pytriton's own: mutual TLS on HTTP, clients must present "
                                    "a certificate signed by http_root_cert; implies http_use_ssl"),
    "http_server_cert": _applied("--http-server-cert", "pytriton's own: the HTTP server's certificate (chain), PEM"),
    "http_server_key": _applied("--http-server-key", "pytriton's own: the HTTP server's private key, PEM"),
    "http_root_cert": _applied("--http-root-cert", "pytriton's own: mutual TLS, the CA certificate(s) HTTP client "
                               "certificates are verified against, PEM"),
    "allow_metrics": _applied("--allow-metrics", "serve /metrics on the metrics port"),
    "allow_gpu_metrics": _applied("--allow-gpu-metrics", "the nv_gpu_* and nv_energy_consumption gauges of the "
                                  "visible GPUs (through NVML); false: absent"),
    "allow_cpu_metrics": _applied("--allow-cpu-metrics", "the nv_cpu_utilization, nv_cpu_memory_total_bytes and "
                                  "nv_cpu_memory_used_bytes gauges; false: absent"),
    "metrics_interval_ms": _applied("--metrics-interval-ms", "the CPU and GPU gauges are read at most once per "
                                    "interval (default 2000 ms); scrapes in between see the last reading. Counters "
                                    "and summaries are exact at every scrape"),
    "metrics_port": _applied("--metrics-port", "the metrics port (0: any free port)"),
    "metrics_address": _applied("--metrics-address", "the metrics endpoint's address"),
    "allow_sagemaker": _applied("--allow-sagemaker", "serve SageMaker's /ping, /invocations and multi-model "
                                "routes on their own port (cloud-platforms.md)"),
    "sagemaker_port": _applied("--sagemaker-port", "the SageMaker endpoint's port; default 8080"),
    "sagemaker_safe_port_range": _applied("--sagemaker-safe-port-range", "LOW-HIGH: every port the server "
                                          "listens on must lie in it, as Triton checks"),
    "sagemaker_thread_count": _ignored("SageMaker requests are served by the server process's event loop; there is "
                                       "no thread pool to size"),
    "allow_vertex_ai": _applied("--allow-vertex-ai", "serve Vertex AI's health and predict routes "
                                "(AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE) on their own port; default: AIP_MODE=PREDICTION "
                                "(cloud-platforms.md)"),
    "vertex_ai_port": _applied("--vertex-ai-port", "the Vertex AI endpoint's port; default AIP_HTTP_PORT, else "
                               "8080"),
    "vertex_ai_thread_count": _ignored("Vertex AI requests are served by the server process's event loop; there is "
                                       "no thread pool to size"),
    "vertex_ai_default_model": _applied("--vertex-ai-default-model", "the model the predict route serves; default: "
                                        "the only model"),
    "openai_port": _applied("--openai-port", "pytriton's own: serve the OpenAI-compatible routes on this port (0: any "
                            "free port); default: off (llm.md)"),
    "openai_api_key": _applied("--openai-api-key", "pytriton's own: the OpenAI port's clients must send "
                               "`Authorization: Bearer KEY`; default: PYTRITON_OPENAI_API_KEY, else no key"),
    "openai_tokenizer": _applied("--openai-tokenizer", "pytriton's own: a Hugging Face tokenizer whose chat template "
                                 "makes chat prompts (needs transformers); default: a plain template"),
    "openai_use_ssl": _applied("--openai-use-ssl", "pytriton's own: serve the OpenAI port over TLS with "
                               f"openai_server_cert and openai_server_key {_TLS}"),
    "openai_use_ssl_mutual": _applied("--openai-use-ssl-mutual", "pytriton's own: mutual TLS on the OpenAI port, "
                                      "clients must present a certificate signed by openai_root_cert; implies "
                                      "openai_use_ssl"),
    "openai_server_cert": _applied("--openai-server-cert", "pytriton's own: the OpenAI port's certificate (chain), "
                                   "PEM"),
    "openai_server_key": _applied("--openai-server-key", "pytriton's own: the OpenAI port's private key, PEM"),
    "openai_root_cert": _applied("--openai-root-cert", "pytriton's own: mutual TLS, the CA certificate(s) the OpenAI "
                                 "port's client certificates are verified against, PEM"),
    "metrics_config": _applied("--metrics-config", "Triton's KEY=VALUE settings counter_latencies, "
                               "histogram_latencies, summary_latencies, summary_quantiles (metrics.md); another key "
                               "is refused"),
    "trace_config": _applied("--trace-config", "Triton's tracing settings (tracing.md)"),
    "cache_config": _applied("--cache-config", "the response cache, `local,size=BYTES` (scheduling.md)"),
    "cache_directory": _ignored("Triton loads cache implementations from it; here the only cache is the built-in "
                                "local cache"),
    "buffer_manager_thread_count": _ignored("Triton's threads copy tensor contents; here tensors are not copied "
                                            "between processes (they travel in shared memory)"),
}

IGNORED_FIELDS: dict[str, str] = {name: info.reason for name, info in FIELDS.items() if info.status == IGNORED}


def reference_table() -> str:
    """The Markdown table of docs/guide/triton-config.md: every field, its CLI option, its status and what it does."""
    lines = ["| Field | CLI option | Status | What it does here |", "| --- | --- | --- | --- |"]
    for name, info in FIELDS.items():
        cli = f"`{info.cli}`" if info.cli else "—"
        lines.append(f"| `{name}` | {cli} | {info.status} | {info.reason} |")
    return "\n".join(lines) + "\n"


__all__ = ["APPLIED", "FIELDS", "IGNORED", "IGNORED_FIELDS", "FieldInfo", "reference_table"]

if __name__ == "__main__":
    print(reference_table(), end="")
