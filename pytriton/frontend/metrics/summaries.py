"""Triton's latency summaries (`nv_inference_*_summary_us`, with `--metrics-config summary_latencies=true`): the
quantiles of the last minute per model, and `_count`/`_sum` equal to the cumulative counters."""

from __future__ import annotations

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


def summary_metrics(models: Iterable[Model]) -> Iterator[Metric]:
    """One summary family per duration, with a sample per quantile and `_count`/`_sum` for each model that has
    summaries (none when they are off)."""
    models = [m for m in models if m.stats.summaries is not None]
    if not models:
        return
    for name, doc, statistic in SUMMARIES:
        metric = Metric(name, doc, "summary")
        for model in models:
            summaries = model.stats.summaries
            assert summaries is not None
            labels = {"model": model.name, "version": str(model.version)}
            count, ns = model.stats.durations[statistic]
            metric.add_sample(f"{name}_count", labels, count)
            metric.add_sample(f"{name}_sum", labels, ns // 1000)
            values = summaries.windows[statistic].quantiles(summaries.quantiles)
            for quantile, value in zip(summaries.quantiles, values):
                metric.add_sample(name, {**labels, "quantile": _quantile_label(quantile)}, value)
        yield metric


def _quantile_label(quantile: float) -> str:
    """As Prometheus writes it: 0.5, 0.99, 1."""
    return repr(quantile) if not quantile.is_integer() else str(int(quantile))


__all__ = ["SUMMARIES", "summary_metrics"]
