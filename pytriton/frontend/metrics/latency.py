"""Triton's optional latency metrics: the summaries (`nv_inference_*_summary_us`, `summary_latencies=true`: quantiles
of the last minute, `_count`/`_sum` equal to the counters) and the first-response histogram of decoupled models
(`nv_inference_first_response_histogram_ms`, `histogram_latencies=true`)."""

from __future__ import annotations

import math
from typing import Iterable, Iterator

from prometheus_client import Metric

from pytriton.core.registry import Model

# (metric name, help, statistic of ModelStatistics.durations and of LatencySummaries.windows)
SUMMARIES = (
    ("nv_inference_request_summary_us", "Summary of inference request duration in microseconds (includes cached "
     "requests)", "success"),
    ("nv_inference_queue_summary_us", "Summary of inference queuing duration in microseconds (includes cached "
     "requests)", "queue"),
    ("nv_inference_compute_input_summary_us", "Summary of compute input duration in microseconds (does not include "
     "cached requests)", "compute_input"),
    ("nv_inference_compute_infer_summary_us", "Summary of compute inference duration in microseconds (does not "
     "include cached requests)", "compute_infer"),
    ("nv_inference_compute_output_summary_us", "Summary of inference compute output duration in microseconds (does "
     "not include cached requests)", "compute_output"),
)


# Those of the response cache, for the models whose cache is on (with the server's cache: `--cache-config`).
CACHE_SUMMARIES = (
    ("nv_cache_hit_summary_us", "Summary of response cache hit duration in microseconds", "cache_hit"),
    ("nv_cache_miss_summary_us", "Summary of response cache miss duration in microseconds", "cache_miss"),
)


def summary_metrics(models: Iterable[Model], cache: bool = False) -> Iterator[Metric]:
    """One summary family per duration, with a sample per quantile and `_count`/`_sum` for each model that has
    summaries (none when they are off); with `cache` (the server has a response cache), the cache's summaries of
    the models whose cache is on."""
    models = [m for m in models if m.stats.summaries is not None]
    if not models:
        return
    cached = [m for m in models if m.config.response_cache] if cache else []
    for family, members in [*((s, models) for s in SUMMARIES), *((s, cached) for s in CACHE_SUMMARIES if cached)]:
        name, doc, statistic = family
        metric = Metric(name, doc, "summary")
        for model in members:
            summaries = model.stats.summaries
            assert summaries is not None
            labels = {"model": model.name, "version": str(model.version)}
            count, ns = model.stats.durations[statistic]
            metric.add_sample(f"{name}_count", labels, count)
            metric.add_sample(f"{name}_sum", labels, ns // 1000)
            values = summaries.windows[statistic].quantiles(summaries.quantiles)
            for quantile, value in zip(summaries.quantiles, values):  # whole µs, as Triton observes them
                metric.add_sample(name, {**labels, "quantile": _quantile_label(quantile)},
                                  value if math.isnan(value) else round(value))
        yield metric


FIRST_RESPONSE = "nv_inference_first_response_histogram_ms"


def first_response_metrics(models: Iterable[Model]) -> Iterator[Metric]:
    """The first-response histogram of each decoupled model that has one (none when histograms are off)."""
    models = [m for m in models if m.stats.first_response is not None]
    if not models:
        return
    metric = Metric(FIRST_RESPONSE, "Duration from request to first response in milliseconds", "histogram")
    for model in models:
        histogram = model.stats.first_response
        assert histogram is not None
        labels = {"model": model.name, "version": str(model.version)}
        cumulative = histogram.cumulative()
        metric.add_sample(f"{FIRST_RESPONSE}_count", labels, cumulative[-1][1])
        metric.add_sample(f"{FIRST_RESPONSE}_sum", labels, histogram.sum_ms)
        for bound, count in cumulative:
            metric.add_sample(f"{FIRST_RESPONSE}_bucket", {**labels, "le": _bound_label(bound)}, count)
    yield metric


def _bound_label(bound: float) -> str:
    """As Prometheus writes a bucket's `le`: 100, 2.5, +Inf."""
    if math.isinf(bound):
        return "+Inf"
    return str(int(bound)) if float(bound).is_integer() else repr(float(bound))


def _quantile_label(quantile: float) -> str:
    """As Prometheus writes it: 0.5, 0.99, 1."""
    return repr(quantile) if not quantile.is_integer() else str(int(quantile))


__all__ = ["CACHE_SUMMARIES", "FIRST_RESPONSE", "SUMMARIES", "first_response_metrics", "summary_metrics"]
