"""The custom metrics of Python-backend models (`pb_utils.MetricFamily`) as Prometheus families, printed as Triton's
prometheus-cpp prints them: only the labels the model gave (sorted), a histogram's `_count`, `_sum` and cumulative
`_bucket`s; a family with no metric left is not printed."""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client import Metric

from pytriton.core.custom_metrics import HISTOGRAM, KIND_NAMES, CustomMetrics


def _printed(value: float) -> float:
    """The value as prometheus-cpp prints a double (16 significant digits: 0.1 + 0.2 is printed 0.3)."""
    return value if math.isinf(value) or math.isnan(value) else float(f"{value:.16g}")


def _bound(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    value = _printed(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)


def custom_metrics(store: CustomMetrics) -> Iterator[Metric]:
    for family in store:
        if not family.metrics:
            continue
        name = family.name
        metric = Metric(name, family.description, KIND_NAMES[family.kind])
        for series in list(family.metrics.values()):
            labels = dict(series.labels)
            if family.kind != HISTOGRAM:
                metric.add_sample(name, labels, _printed(series.value))
                continue
            metric.add_sample(f"{name}_count", labels, series.count)
            metric.add_sample(f"{name}_sum", labels, _printed(series.sum))
            for bound, count in series.cumulative():
                metric.add_sample(f"{name}_bucket", {**labels, "le": _bound(bound)}, count)
        yield metric


__all__ = ["custom_metrics"]
