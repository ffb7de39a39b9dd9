"""Custom metrics of workers (`pb_utils.MetricFamily`): applies a worker's METRICS messages to the core's
`CustomMetrics` and answers the calls that wait (family creation, `value()`).

A worker names its families and metrics by handles of its own; what a worker holds is released when it says so
(its objects were dropped) or when its link is dropped (its model was unloaded, or it died).
"""

from __future__ import annotations

import logging
from typing import Any

from pytriton.core.custom_metrics import CustomMetric, CustomMetricError, CustomMetricFamily, CustomMetrics
from pytriton.proxy.messages import MetricOp
from pytriton.proxy.router import ProxyRouter, WorkerLink

logger = logging.getLogger("pytriton.supervisor")

_KIND_NAME = ("TRITONSERVER_METRIC_KIND_COUNTER", "TRITONSERVER_METRIC_KIND_GAUGE", "TRITONSERVER_METRIC_KIND_HISTOGRAM")


class CustomMetricsBridge:
    """Serves the custom metrics of every worker of a router with one `CustomMetrics` store."""

    def __init__(self, router: ProxyRouter, store: CustomMetrics):
        self.router = router
        self.store = store
        self._held: dict[WorkerLink, dict[int, CustomMetricFamily | CustomMetric]] = {}
        router.on_metrics = self._on_metrics
        previous = router.on_link_dropped

        def dropped(link: WorkerLink) -> None:
            if previous is not None:
                previous(link)
            self.release_all(link)

        router.on_link_dropped = dropped

    def _on_metrics(self, link: WorkerLink, message: Any) -> None:
        held = self._held.setdefault(link, {})
        value, error = 0.0, ""
        for op in message.metric_ops:
            try:
                value = self._apply(held, op)
                error = ""
            except CustomMetricError as exc:
                error = str(exc)
            except (KeyError, IndexError, ValueError) as exc:  # a handle it does not hold: a bug, not the model's
                error = f"internal error: {exc!r}"
                logger.warning("custom metrics of model instance '%s': %s", link.label, error)
        if message.id:  # (the answer is about its last op)
            self.router.send_metrics_answer(link, message.id, value, error)

    def _apply(self, held: dict[int, CustomMetricFamily | CustomMetric], op: Any) -> float:
        kind = op.kind
        if kind == MetricOp.FAMILY_NEW:
            held[op.handle] = self.store.new_family(op.name, op.description, op.metric_kind)
        elif kind == MetricOp.METRIC_NEW:
            family = held[op.family]
            assert isinstance(family, CustomMetricFamily)
            held[op.handle] = self.store.new_metric(family, dict(op.labels), list(op.buckets))
        elif kind in (MetricOp.FAMILY_DELETE, MetricOp.METRIC_DELETE):
            self._release(held.pop(op.handle))
        else:
            metric = held[op.handle]
            assert isinstance(metric, CustomMetric)
            if kind == MetricOp.ADD:
                metric.add(op.value)
            elif kind == MetricOp.SET:
                metric.set(op.value)
            elif kind == MetricOp.OBSERVE:
                metric.merge(list(op.bucket_counts), op.value, op.count)
            elif kind == MetricOp.VALUE:
                if metric.family.kind == 2:
                    raise CustomMetricError(f"{_KIND_NAME[2]} does not support Value")
                return metric.value
        return 0.0

    def _release(self, item: CustomMetricFamily | CustomMetric) -> None:
        if isinstance(item, CustomMetric):
            self.store.release_metric(item)
        else:
            self.store.release_family(item)

    def release_all(self, link: WorkerLink) -> None:
        """Whatever the worker of `link` held (metrics first, then families)."""
        held = self._held.pop(link, {})
        for item in sorted(held.values(), key=lambda i: isinstance(i, CustomMetricFamily)):
            self._release(item)


__all__ = ["CustomMetricsBridge"]
