"""The server's custom metrics store (pb_utils.MetricFamily values) and how /metrics prints it: shared families and
metrics by name and labels, holds and releases, Triton's refusals, and prometheus-cpp's text for each kind."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from pytriton.core.custom_metrics import COUNTER, GAUGE, HISTOGRAM, CustomMetricError, CustomMetrics
from pytriton.frontend.metrics.collector import render_metrics
from pytriton.frontend.metrics.custom import custom_metrics


def text(store: CustomMetrics) -> list[str]:
    registry = CollectorRegistry(auto_describe=False)

    class Source:
        def collect(self):
            return custom_metrics(store)

    registry.register(Source())
    return [line for line in render_metrics(registry).decode().splitlines() if line]


def test_same_name_and_labels_share_one_value():
    store = CustomMetrics()
    first = store.new_family("requests_total", "Requests", COUNTER)
    second = store.new_family("requests_total", "another description: the first one stays", COUNTER)
    assert first is second
    a = store.new_metric(first, {"b": "2", "a": "1"})
    b = store.new_metric(second, {"a": "1", "b": "2"})
    assert a is b
    a.add(2)
    b.add(0.5)
    other = store.new_metric(first, {"a": "other"})
    other.add(1)
    assert text(store) == [
        "# HELP requests_total Requests",
        "# TYPE requests_total counter",
        'requests_total{a="1",b="2"} 2.5',
        'requests_total{a="other"} 1',
    ]


def test_a_metric_leaves_with_its_last_hold_and_a_family_with_its_last_metric():
    store = CustomMetrics()
    family = store.new_family("load", "", GAUGE)
    store.new_family("load", "", GAUGE)
    metric = store.new_metric(family, {})
    store.new_metric(family, {}).set(3)
    store.release_metric(metric)
    assert text(store) == ["# TYPE load gauge", "load 3"]  # (an empty description prints no HELP)
    store.release_metric(metric)
    assert text(store) == []
    store.release_family(family)
    store.release_family(family)
    assert list(store) == []
    store.new_family("load", "now a counter", COUNTER)  # gone is gone: the name is free again


def test_histogram_prints_count_sum_and_cumulative_buckets():
    store = CustomMetrics()
    family = store.new_family("latency", "Latency", HISTOGRAM)
    metric = store.new_metric(family, {"model": "m"}, [0.1, 1, 2.5])
    for value in (0.1, 0.2, 0.1, 3, 1):
        metric.observe(value)
    metric.merge([1, 0, 0, 1], 10.05, 2)  # (what a worker gathered)
    assert text(store) == [
        "# HELP latency Latency",
        "# TYPE latency histogram",
        'latency_count{model="m"} 7',
        'latency_sum{model="m"} 14.45',  # (printed with 16 digits, as prometheus-cpp prints it)
        'latency_bucket{model="m",le="0.1"} 3',
        'latency_bucket{model="m",le="1"} 5',
        'latency_bucket{model="m",le="2.5"} 5',
        'latency_bucket{model="m",le="+Inf"} 7',
    ]


@pytest.mark.parametrize(("call", "message"), [
    (lambda s: s.new_family("0abc", "", COUNTER), "Invalid metric name"),
    (lambda s: s.new_family("__abc", "", COUNTER), "Invalid metric name"),
    (lambda s: s.new_family("a-b", "", COUNTER), "Invalid metric name"),
    (lambda s: s.new_family("x", "", 7), "Unsupported kind passed to MetricFamily constructor."),
    (lambda s: (s.new_family("x", "", COUNTER), s.new_family("x", "", GAUGE)),
     "Family name already exists with different type"),
    (lambda s: s.new_metric(s.new_family("x", "", COUNTER), {"a-b": "1"}), "Invalid label name"),
    (lambda s: s.new_metric(s.new_family("x", "", HISTOGRAM), {"le": "1"}, [1]), "Invalid label name"),
    (lambda s: s.new_metric(s.new_family("x", "", HISTOGRAM), {}, [1, 1]), "Bucket Boundaries must be strictly sorted"),
])
def test_refusals_in_tritons_words(call, message):
    with pytest.raises(CustomMetricError) as info:
        call(CustomMetrics())
    assert str(info.value) == message


def test_le_is_a_fine_label_outside_histograms():
    store = CustomMetrics()
    store.new_metric(store.new_family("x", "", COUNTER), {"le": "1"})
