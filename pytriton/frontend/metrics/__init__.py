"""Prometheus metrics in Triton's names, read from the core's statistics at scrape time."""

from pytriton.frontend.metrics.collector import TritonMetricsCollector, render_metrics

__all__ = ["TritonMetricsCollector", "render_metrics"]
