"""A prometheus-client collector over the core: counters are the statistics themselves, so the two agree."""

from __future__ import annotations

import math
import os
from typing import Any, Iterator, cast

from prometheus_client import CollectorRegistry, Metric

from pytriton.core.response_cache import ResponseCache
from pytriton.core.server_core import ServerCore
from pytriton.frontend.metrics.custom import custom_metrics
from pytriton.frontend.metrics.latency import first_response_metrics, summary_metrics

# (metric name, help, statistic, divisor) — durations are exported in microseconds as Triton does.
_COUNTERS = (
    ("nv_inference_request_success", "Number of successful inference requests, all batch sizes", "success.count", 1),
    ("nv_inference_request_failure", "Number of failed inference requests, all batch sizes", "fail.count", 1),
    ("nv_inference_count", "Number of inferences performed (does not include cached requests)", "inference_count", 1),
    ("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)",
     "execution_count", 1),
    ("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds (includes cached "
     "requests)", "success.ns", 1000),
    ("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds (includes cached "
     "requests)", "queue.ns", 1000),
    ("nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds (does not include "
     "cached requests)", "compute_input.ns", 1000),
    ("nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds (does not "
     "include cached requests)", "compute_infer.ns", 1000),
    ("nv_inference_compute_output_duration_us", "Cumulative inference compute output duration in microseconds (does "
     "not include cached requests)", "compute_output.ns", 1000),
)
# Triton's per-model response-cache counters: only for models whose config enables response_cache, with the latency
# counters.
_CACHE_COUNTERS = (
    ("nv_cache_num_hits_per_model", "Number of cache hits per model", "cache_hit.count", 1),
    ("nv_cache_hit_duration_per_model", "Total cache hit duration per model, in microseconds", "cache_hit.ns", 1000),
    ("nv_cache_num_misses_per_model", "Number of cache misses per model", "cache_miss.count", 1),
    ("nv_cache_miss_duration_per_model", "Total cache miss (insert+lookup) duration per model, in microseconds",
     "cache_miss.ns", 1000),
)

# Triton's summary gauges of the server's response cache (shown while it has one). tritonserver 2.51 leaves all but
# nv_cache_util at 0 whatever the cache does; here they say what their help says. (name, help, field, divisor)
_CACHE_GAUGES = (
    ("nv_cache_num_entries", "Number of responses stored in response cache", "entries", 1),
    ("nv_cache_num_hits", "Number of cache hits in response cache", "hits", 1),
    ("nv_cache_num_misses", "Number of cache misses in response cache", "misses", 1),
    ("nv_cache_num_lookups", "Number of cache lookups in response cache", "lookups", 1),
    ("nv_cache_num_evictions", "Number of cache evictions in response cache", "evictions", 1),
    ("nv_cache_lookup_duration", "Total cache lookup duration (hit and miss), in microseconds", "lookup_ns", 1000),
    ("nv_cache_insertion_duration", "Total cache insertion duration, in microseconds", "insertion_ns", 1000),
)


def _cache_gauges(cache: ResponseCache) -> Iterator[Metric]:
    util = Metric("nv_cache_util", "Cache utilization [0.0 - 1.0]", "gauge")
    util.add_sample("nv_cache_util", {}, cache.used / cache.size if cache.size else 0.0)
    yield util
    values = {"entries": len(cache), "hits": cache.hits, "misses": cache.misses, "lookups": cache.hits + cache.misses,
              "evictions": cache.evictions, "lookup_ns": cache.lookup_ns, "insertion_ns": cache.insertion_ns}
    for name, doc, field, divisor in _CACHE_GAUGES:
        gauge = Metric(name, doc, "gauge")
        gauge.add_sample(name, {}, values[field] // divisor)
        yield gauge


def _stat(stats: Any, key: str) -> int:
    if "." in key:
        name, field = key.split(".")
        count, ns = stats.durations[name]
        return cast(int, count if field == "count" else ns)
    return cast(int, getattr(stats, key))


class TritonMetricsCollector:
    """Yields Triton's nv_* metrics per model plus pytriton's worker health, when scraped."""

    def __init__(self, core: ServerCore):
        self.core = core

    def collect(self) -> Iterator[Metric]:
        models = list(self.core.registry)
        for name, doc, key, divisor in _COUNTERS:
            if divisor != 1 and not self.core.metrics.counter_latencies:
                continue  # `--metrics-config counter_latencies=false`: the *_duration_us counters are left out
            metric = Metric(name, doc, "counter")
            for model in models:
                if key == "fail.count":  # Triton's: one sample per failure reason
                    for reason in sorted(model.stats.failures):
                        metric.add_sample(name, {"model": model.name, "reason": reason, "version": str(model.version)},
                                          model.stats.failures[reason])
                    continue
                value = _stat(model.stats, key)
                metric.add_sample(name, {"model": model.name, "version": str(model.version)},
                                  value // divisor)  # durations: whole microseconds, as Triton reports them
            yield metric
        # (as Triton: every model whose config enables response_cache, at 0 on a server without a cache)
        cached = [m for m in models if m.config.response_cache]
        for name, doc, key, divisor in _CACHE_COUNTERS if cached and self.core.metrics.counter_latencies else ():
            metric = Metric(name, doc, "counter")
            for model in cached:
                metric.add_sample(name, {"model": model.name, "version": str(model.version)},
                                  _stat(model.stats, key) // divisor)
            yield metric
        if self.core.response_cache is not None:
            yield from _cache_gauges(self.core.response_cache)
        pending = Metric("nv_inference_pending_request_count", "Instantaneous number of pending requests awaiting "
                         "execution per-model.", "gauge")
        # pytriton's own: what the instances run now, and how long the least recently progressing execution has gone
        # without progress (a wedge, e.g. executions waiting for each other through BLS, shows as a growing value)
        running = Metric("pytriton_model_executions_in_flight", "Executions the instances of the model run now (not "
                         "those waiting behind them)", "gauge")
        stalled = Metric("pytriton_model_execution_stall_seconds", "How long the model's running execution with the "
                         "least recent progress has gone without any (no answer, no streamed response); 0 when none "
                         "runs", "gauge")
        for model in models:
            labels = {"model": model.name, "version": str(model.version)}
            scheduler = model.scheduler
            pending.add_sample("nv_inference_pending_request_count", labels, scheduler.pending_count)
            running.add_sample("pytriton_model_executions_in_flight", labels, len(scheduler.running()))
            stalled.add_sample("pytriton_model_execution_stall_seconds", labels, round(scheduler.stalled_ns() / 1e9, 3))
        yield pending
        ready = Metric("pytriton_model_ready", "1 while the model version is ready for inference requests, 0 while "
                       "it is not", "gauge")
        for (name, version), is_ready in self.core.model_readiness().items():
            ready.add_sample("pytriton_model_ready", {"model": name, "version": version}, 1 if is_ready else 0)
        yield ready
        yield running
        yield stalled
        yield from summary_metrics(models, cache=self.core.response_cache is not None)
        yield from first_response_metrics(models)

        up = Metric("pytriton_model_instance_up", "1 if the worker process of the model instance is serving", "gauge")
        restarts = Metric("pytriton_model_instance_restarts", "Times the worker process of the model instance was "
                          "restarted after it died", "counter")
        for model in models:
            for instance in model.instances():
                labels = {"model": model.name, "version": str(model.version), "instance": instance.label,
                          "kind": "KIND_CPU" if instance.gpu is None else "KIND_GPU",
                          "gpu": "" if instance.gpu is None else str(instance.gpu), "gpu_uuid": instance.gpu_uuid}
                up.add_sample("pytriton_model_instance_up", labels, 1 if instance.up else 0)
                restarts.add_sample("pytriton_model_instance_restarts", labels, instance.restarts)
        yield up
        yield restarts

        rss = Metric("pytriton_server_resident_memory_bytes", "Resident memory of the server process and its "
                     "workers, in bytes", "gauge")
        pids = [os.getpid()] + [i.pid for m in models for i in m.instances() if i.pid is not None]
        rss.add_sample("pytriton_server_resident_memory_bytes", {}, sum(_rss(p) for p in pids))
        yield rss
        yield from custom_metrics(self.core.custom_metrics)


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _number(value: float) -> str:
    """Integral values as integers (as Triton prints its counters), others as the shortest exact float."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    return repr(float(value))


def _escape(text: str, quote: bool) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if quote else text


def render_metrics(registry: CollectorRegistry) -> bytes:
    """Prometheus text format 0.0.4 with Triton's metric names.

    prometheus_client's `generate_latest` names a counter family `<name>_total` in HELP/TYPE, which then does
    not match the samples Triton names without the suffix (`nv_inference_request_success{...} 2`), and prints
    every value as a float; so the families are written out here, as Triton's prometheus-cpp does.
    """
    lines = []
    for metric in registry.collect():
        if metric.documentation:  # (an empty HELP is left out, as prometheus-cpp does)
            lines.append(f"# HELP {metric.name} {_escape(metric.documentation, False)}")
        kind = metric.type if metric.type in ("counter", "gauge", "summary", "histogram") else "untyped"
        lines.append(f"# TYPE {metric.name} {kind}")
        for sample in metric.samples:
            labels = ",".join(f'{k}="{_escape(str(v), True)}"' for k, v in sample.labels.items())
            lines.append(f"{sample.name}{{{labels}}} {_number(sample.value)}" if labels
                         else f"{sample.name} {_number(sample.value)}")
    return ("\n".join(lines) + "\n").encode()


__all__ = ["CONTENT_TYPE", "TritonMetricsCollector", "render_metrics"]
