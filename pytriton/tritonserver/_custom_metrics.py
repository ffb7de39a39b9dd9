"""`MetricFamily` and `Metric`: custom metrics an application creates (Triton's `TRITONSERVER_MetricFamily` /
`TRITONSERVER_Metric`), shown by every in-process server's `metrics()`.

As in Triton, they belong to the process, not to a server: Triton's families live in the core's one Prometheus
registry. A family or metric is released when its object is collected. Values are read and written under one lock
(the application's threads write, the server's loop thread renders).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any

from prometheus_client import Metric as PrometheusMetric

from pytriton.core.custom_metrics import CustomMetric, CustomMetricError, CustomMetrics
from pytriton.frontend.metrics.custom import custom_metrics
from pytriton.tritonserver._enums import MetricKind
from pytriton.tritonserver._errors import InvalidArgumentError, UnsupportedError
from pytriton.tritonserver._pybind import accepts, check_method

_STORE = CustomMetrics()
_LOCK = threading.Lock()


class MetricFamily:
    """A family of custom metrics: a kind (COUNTER or GAUGE), a name and a description (Triton's
    `TRITONSERVER_MetricFamily(kind, name, description)`)."""

    def __init__(self, kind: MetricKind, name: str, description: str) -> None:
        check_method("TRITONSERVER_MetricFamily", "__init__", [MetricKind, "str", "str"], "None", kind, name,
                     description)
        with _LOCK:
            try:
                self._family = _STORE.new_family(str(name), str(description), int(kind))
            except CustomMetricError as exc:  # (Triton's bindings drop this error; its metrics then fail)
                raise InvalidArgumentError(str(exc)) from None
        self._finalizer = weakref.finalize(self, _release_family, self._family)


class Metric:
    """One labelled metric of a family (Triton's `Metric(family, labels)`)."""

    def __init__(self, family: MetricFamily, labels: dict[str, str] | None = None) -> None:
        if not isinstance(family, MetricFamily):
            raise TypeError(f"__init__(): incompatible constructor arguments; family must be a MetricFamily, not "
                            f"{type(family).__name__}")
        for name, value in (labels or {}).items():
            if not isinstance(value, str) or not accepts("str", name):
                raise InvalidArgumentError(f"Parameter [{name}] must have a type of TRITONSERVER_PARAMETER_STRING to "
                                           "be added as a label.")
        self._family = family  # (a metric keeps its family, as pybind11's keep_alive does)
        with _LOCK:
            try:
                self._metric: CustomMetric = _STORE.new_metric(family._family, dict(labels or {}))
            except CustomMetricError as exc:
                raise InvalidArgumentError(str(exc)) from None
        self._finalizer = weakref.finalize(self, _release_metric, self._metric)

    @property
    def kind(self) -> MetricKind:
        return MetricKind(self._metric.family.kind)

    @property
    def value(self) -> float:
        with _LOCK:
            return float(self._metric.value)

    def increment(self, value: float) -> None:
        check_method("TRITONSERVER_Metric", "increment", ["float"], "None", value)
        if self.kind == MetricKind.COUNTER and value < 0:
            raise InvalidArgumentError("TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by "
                                       "non-negative values.")
        with _LOCK:
            self._metric.add(float(value))

    def set_value(self, value: float) -> None:
        check_method("TRITONSERVER_Metric", "set_value", ["float"], "None", value)
        if self.kind == MetricKind.COUNTER:
            raise UnsupportedError("TRITONSERVER_METRIC_KIND_COUNTER does not support Set")
        with _LOCK:
            self._metric.set(float(value))


def _release_family(family: Any) -> None:
    with _LOCK:
        _STORE.release_family(family)


def _release_metric(metric: CustomMetric) -> None:
    with _LOCK:
        _STORE.release_metric(metric)


class ApplicationMetrics:
    """A prometheus_client collector of the application's families (those a model of `taken` has not named)."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def collect(self) -> Iterator[PrometheusMetric]:
        with _LOCK:
            families = [m for m in custom_metrics(_STORE) if m.name not in self.taken]
        yield from families


__all__ = ["ApplicationMetrics", "Metric", "MetricFamily"]
