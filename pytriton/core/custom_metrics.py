"""Custom metrics of Python-backend models (`pb_utils.MetricFamily` / `Metric`): the server-wide families and their
values, as Triton's core keeps them, for the metrics endpoint to export.

Families are global: every model instance that creates family `name` (with the same kind) shares it, and every
`Metric` with the same labels in it shares one value. Each creation is a hold; a metric leaves when its last hold
is released (its `Metric` objects are gone, or the workers that made them), a family once it has neither holds nor
metrics. Triton never removes a family from its registry (DLIS-4072), so there a name keeps its first kind until the
server stops; here a family that is gone is gone (its name may come back with another kind).
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence

COUNTER, GAUGE, HISTOGRAM = 0, 1, 2
KIND_NAMES = {COUNTER: "counter", GAUGE: "gauge", HISTOGRAM: "histogram"}


class CustomMetricError(ValueError):
    """A custom-metrics operation Triton refuses (the message is Triton's, without the pb_utils prefix)."""


@dataclasses.dataclass(eq=False)
class CustomMetric:
    """One labelled series of a family: a counter's or gauge's value, or a histogram's buckets, sum and count."""

    family: CustomMetricFamily
    labels: tuple[tuple[str, str], ...]  # sorted by name, as Prometheus prints them
    buckets: tuple[float, ...] = ()
    value: float = 0.0
    bucket_counts: list[int] = dataclasses.field(default_factory=list)  # per bucket, and one above them all
    sum: float = 0.0
    count: int = 0
    holds: int = 0

    def add(self, amount: float) -> None:
        self.value += amount

    def set(self, value: float) -> None:
        self.value = value

    def observe(self, value: float) -> None:
        """One observation (the workers send aggregates: `merge`)."""
        self.bucket_counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def merge(self, bucket_counts: Sequence[int], total: float, count: int) -> None:
        """Observations gathered elsewhere with the same buckets: per-bucket counts (not cumulative), their sum."""
        for index, n in enumerate(bucket_counts[: len(self.bucket_counts)]):
            self.bucket_counts[index] += n
        self.sum += total
        self.count += count

    def cumulative(self) -> Iterator[tuple[float, int]]:
        """(upper bound, observations at or below it), the last bound +Inf."""
        running = 0
        for bound, n in zip((*self.buckets, math.inf), self.bucket_counts):
            running += n
            yield bound, running


@dataclasses.dataclass(eq=False)
class CustomMetricFamily:
    name: str
    description: str
    kind: int
    holds: int = 0
    metrics: dict[tuple[tuple[str, str], ...], CustomMetric] = dataclasses.field(default_factory=dict)


# The server's own families are named under these; a custom family there would print a second HELP/TYPE of one name
# (which Prometheus refuses: the whole scrape is lost) or forge the server's samples. (Triton's prometheus-cpp registry
# merges a same-kind family into its own instead: a model can then add to Triton's nv_inference_count.)
RESERVED_PREFIXES = ("nv_", "pytriton_")


class CustomMetrics:
    """The server's custom metric families, by name (in order of creation, as they are exported)."""

    def __init__(self) -> None:
        self.families: dict[str, CustomMetricFamily] = {}

    def new_family(self, name: str, description: str, kind: int) -> CustomMetricFamily:
        """Hold family `name`, creating it if needed; a family of that name with another kind is an error. (As in
        Triton, a different description does not matter: the first one stays.)"""
        if kind not in KIND_NAMES:
            raise CustomMetricError("Unsupported kind passed to MetricFamily constructor.")
        if not valid_metric_name(name):
            raise CustomMetricError("Invalid metric name")
        if name.startswith(RESERVED_PREFIXES):
            raise CustomMetricError(f"Invalid metric name: '{name}' is in the namespace of the server's own metrics "
                                    f"({', '.join(RESERVED_PREFIXES)}); a custom family must not share it")
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = CustomMetricFamily(name, description, kind)
        elif family.kind != kind:
            raise CustomMetricError("Family name already exists with different type")
        family.holds += 1
        return family

    def release_family(self, family: CustomMetricFamily) -> None:
        family.holds = max(0, family.holds - 1)
        self._drop_if_unused(family)

    def new_metric(self, family: CustomMetricFamily, labels: Mapping[str, str], buckets: Sequence[float] = ()
                   ) -> CustomMetric:  # fmt: skip
        """Hold the metric of `family` with these labels, creating it if needed (an existing histogram keeps the
        buckets it was made with)."""
        key = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
        for label, _ in key:
            if not valid_label_name(label, family.kind):
                raise CustomMetricError("Invalid label name")
        metric = family.metrics.get(key)
        if metric is None:
            bounds = tuple(float(b) for b in buckets) if family.kind == HISTOGRAM else ()
            if any(b <= a for a, b in itertools.pairwise(bounds)):
                raise CustomMetricError("Bucket Boundaries must be strictly sorted")
            metric = CustomMetric(family, key, bounds, bucket_counts=[0] * (len(bounds) + 1))
            family.metrics[key] = metric
        metric.holds += 1
        return metric

    def release_metric(self, metric: CustomMetric) -> None:
        metric.holds -= 1
        if metric.holds > 0:
            return
        family = metric.family
        if family.metrics.get(metric.labels) is metric:
            del family.metrics[metric.labels]
        self._drop_if_unused(family)

    def _drop_if_unused(self, family: CustomMetricFamily) -> None:
        if family.holds <= 0 and not family.metrics and self.families.get(family.name) is family:
            del self.families[family.name]

    def __iter__(self) -> Iterator[CustomMetricFamily]:
        return iter(list(self.families.values()))


def _name_starts_valid(name: str) -> bool:
    return bool(name) and not name[0].isdigit() and not name.startswith("__")


def valid_metric_name(name: str) -> bool:
    """Prometheus' rule for metric names: [a-zA-Z_:][a-zA-Z0-9_:]*, not starting with '__'."""
    return _name_starts_valid(name) and all(c.isascii() and (c.isalnum() or c in "_:") for c in name)


def valid_label_name(name: str, kind: int) -> bool:
    """Prometheus' rule for label names: [a-zA-Z_][a-zA-Z0-9_]*, not '__*', and not 'le' on a histogram."""
    if kind == HISTOGRAM and name == "le":
        return False
    return _name_starts_valid(name) and all(c.isascii() and (c.isalnum() or c == "_") for c in name)


__all__ = ["COUNTER", "GAUGE", "HISTOGRAM", "CustomMetric", "CustomMetricError", "CustomMetricFamily", "CustomMetrics"]
