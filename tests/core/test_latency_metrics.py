"""The windowed quantile estimate behind the latency summaries, and the `--metrics-config` syntax."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from pytriton.config.metrics import DEFAULT_QUANTILES, MetricsSettings
from pytriton.core.latency_metrics import (
    FIRST_RESPONSE_BUCKETS_MS,
    RELATIVE_ERROR,
    FirstResponseHistogram,
    LatencySummaries,
    WindowedQuantiles,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_quantiles_are_within_the_relative_error_of_the_true_rank():
    rng = random.Random(7)
    values = [rng.lognormvariate(8, 1.5) for _ in range(20000)]
    window = WindowedQuantiles(clock=FakeClock())
    for v in values:
        window.observe(v)
    qs = [0.5, 0.9, 0.95, 0.99, 0.999]
    exact = np.quantile(values, qs, method="inverted_cdf")
    for q, got, want in zip(qs, window.quantiles(qs), exact):
        assert abs(got - want) <= RELATIVE_ERROR * want * 1.0001, (q, got, want)


def test_small_values_and_empty_window():
    window = WindowedQuantiles(clock=FakeClock())
    assert all(math.isnan(v) for v in window.quantiles([0.5, 0.99]))
    for v in (0.0, 0.2, 0.9):
        window.observe(v)
    window.observe(1000.0)
    assert window.quantiles([0.5, 1.0]) == [0.0, pytest.approx(1000.0, rel=RELATIVE_ERROR)]


def test_old_observations_leave_the_window():
    clock = FakeClock()
    window = WindowedQuantiles(max_age_s=60, age_buckets=5, clock=clock)
    for _ in range(100):
        window.observe(5000.0)
    clock.now += 30
    for _ in range(10):
        window.observe(100.0)
    assert window.quantiles([0.5]) == [pytest.approx(5000.0, rel=RELATIVE_ERROR)]  # still counted at 30 s
    clock.now += 36  # the 5000s were observed 66 s ago: gone; the 100s 36 s ago: kept
    assert window.quantiles([0.5, 0.99]) == [pytest.approx(100.0, rel=RELATIVE_ERROR)] * 2
    clock.now += 1000  # a long idle time empties the window (and does not loop per slice)
    assert math.isnan(window.quantiles([0.5])[0])
    window.observe(7.0)
    assert window.quantiles([0.5]) == [pytest.approx(7.0, rel=RELATIVE_ERROR)]


def test_summaries_observe_in_microseconds():
    summaries = LatencySummaries(MetricsSettings(summary_latencies=True), clock=FakeClock())
    summaries.observe(2_000_000, 0, 10_000, 1_500_000, 20_000)  # ns
    assert summaries.quantiles == [q for q, _ in DEFAULT_QUANTILES]
    assert summaries.windows["success"].quantiles([0.5]) == [pytest.approx(2000, rel=RELATIVE_ERROR)]
    assert summaries.windows["queue"].quantiles([0.5]) == [0.0]
    assert summaries.windows["compute_infer"].quantiles([0.5]) == [pytest.approx(1500, rel=RELATIVE_ERROR)]


def test_parse_metrics_config():
    assert MetricsSettings.parse([]) == MetricsSettings()
    settings = MetricsSettings.parse(["summary_latencies=true", 'summary_quantiles="0.5:0.05,0.99:0.001"',
                                      "counter_latencies=false"])
    assert settings == MetricsSettings(counter_latencies=False, summary_latencies=True,
                                       summary_quantiles=((0.5, 0.05), (0.99, 0.001)))
    # A later item wins (the container's entry point sets summary_latencies=true; a command may turn it off).
    assert not MetricsSettings.parse(["summary_latencies=true", "summary_latencies=false"]).summary_latencies


@pytest.mark.parametrize("item, message", [
    ("summary_latencies", "expects KEY=VALUE"),
    ("cache_latencies=true", "unknown setting 'cache_latencies'"),
    ("summary_latencies=maybe", "summary_latencies expects true or false, got 'maybe'"),
    ("summary_quantiles=0.5", "got '0.5'"),
    ("summary_quantiles=1.5:0.01", "got '1.5:0.01'"),
])
def test_parse_metrics_config_errors_name_the_setting(item, message):
    with pytest.raises(ValueError, match=message):
        MetricsSettings.parse([item])


def test_triton_config_metrics_config_reaches_the_server_config():
    """`TritonConfig(metrics_config=[...])` (PyTriton's field) is checked at once and handed to the server process."""
    from pytriton.config.server import ServerConfig
    from pytriton.config.triton_config import TritonConfig, TritonSecurityConfig, server_config
    from pytriton.exceptions import PyTritonValidationError

    config = server_config(TritonConfig(metrics_config=["summary_latencies=true"]), TritonSecurityConfig())
    assert ServerConfig.from_json(config.to_json()).metrics_config == ["summary_latencies=true"]
    with pytest.raises(PyTritonValidationError, match="TritonConfig.metrics_config: .*unknown setting 'cache'"):
        TritonConfig(metrics_config=["cache=true"])


def test_first_response_histogram_buckets_in_whole_milliseconds():
    histogram = FirstResponseHistogram()
    assert FIRST_RESPONSE_BUCKETS_MS == (100, 500, 2000, 5000)  # Triton's default buckets
    for ms in (0.4, 99.9, 100.0, 100.9, 101, 499, 1999, 5000, 5001, 60000):
        histogram.observe(int(ms * 1_000_000))
    # 100.9 ms counts as 100 (Triton records whole milliseconds); a bucket holds the values <= its bound.
    assert histogram.cumulative() == [(100, 4), (500, 6), (2000, 7), (5000, 8), (math.inf, 10)]
    assert histogram.sum_ms == 0 + 99 + 100 + 100 + 101 + 499 + 1999 + 5000 + 5001 + 60000


def test_parse_histogram_latencies():
    assert MetricsSettings.parse(["histogram_latencies=true"]).histogram_latencies
    assert not MetricsSettings().histogram_latencies
