"""The latency metrics Triton offers beyond its counters: sliding-window quantiles (`nv_inference_*_summary_us`) and
the first-response histogram of decoupled models (`nv_inference_first_response_histogram_ms`).

A quantile is estimated from counts in logarithmic buckets (relative value error at most `RELATIVE_ERROR`): one
O(1) update per observation, and a window of `AGE_BUCKETS` such tables rotated over `MAX_AGE_S`, as Prometheus
summaries slide (prometheus_client's Python Summary computes no quantiles at all).
"""

from __future__ import annotations

import bisect
import math
import time
from typing import Callable

from pytriton.config.metrics import MetricsSettings

MAX_AGE_S = 60.0  # observations older than this no longer count (prometheus-cpp's default for summaries)
AGE_BUCKETS = 5  # ... dropped a fifth of the window at a time
RELATIVE_ERROR = 0.01  # a reported quantile is within 1% of the value of some observation of that rank

# The durations of ModelStatistics that have a summary, in the order record_success passes them.
SUMMARY_STATISTICS = ("success", "queue", "compute_input", "compute_infer", "compute_output")
CACHE_STATISTICS = ("cache_hit", "cache_miss")  # (summaries of a model whose response cache is on)

_GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)  # the ratio of a bucket's upper to its lower bound
_LOG_GAMMA = math.log(_GAMMA)


class WindowedQuantiles:
    """Quantiles of the values observed in the last `max_age_s` (to within one age bucket)."""

    def __init__(self, max_age_s: float = MAX_AGE_S, age_buckets: int = AGE_BUCKETS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._slice_s = max_age_s / age_buckets
        self._tables: list[dict[int, int]] = [{} for _ in range(age_buckets)]
        self._current = 0
        self._rotate_at = clock() + self._slice_s

    def observe(self, value: float, now: float | None = None) -> None:
        """Count one value (>= 0) at `now` (default: the clock's time); values below 1 share the zero bucket."""
        if now is None:
            now = self._clock()
        if now >= self._rotate_at:
            self._rotate(now)
        index = math.ceil(math.log(value) / _LOG_GAMMA) if value >= 1.0 else 0
        table = self._tables[self._current]
        table[index] = table.get(index, 0) + 1

    def _rotate(self, now: float) -> None:
        """Start a fresh table for each slice of time that has passed (the oldest table is dropped)."""
        passed = int((now - self._rotate_at) // self._slice_s) + 1
        for _ in range(min(passed, len(self._tables))):
            self._current = (self._current + 1) % len(self._tables)
            self._tables[self._current] = {}
        self._rotate_at += passed * self._slice_s

    def quantiles(self, qs: list[float]) -> list[float]:
        """The value at each quantile in `qs` (NaN when the window holds nothing, as Prometheus reports it)."""
        now = self._clock()
        if now >= self._rotate_at:
            self._rotate(now)
        merged: dict[int, int] = {}
        for table in self._tables:
            for index, count in table.items():
                merged[index] = merged.get(index, 0) + count
        total = sum(merged.values())
        if total == 0:
            return [math.nan] * len(qs)
        ordered = sorted(merged.items())
        out = []
        for q in qs:
            rank = max(1, math.ceil(q * total))  # the rank-th smallest observation
            seen = 0
            for index, count in ordered:
                seen += count
                if seen >= rank:
                    out.append(_value(index))
                    break
        return out


def _value(index: int) -> float:
    """The representative of a bucket: within RELATIVE_ERROR of every value that falls in it."""
    if index == 0:
        return 0.0
    return 2 * _GAMMA ** index / (_GAMMA + 1)


class LatencySummaries:
    """One window per duration of SUMMARY_STATISTICS, in microseconds; `_count`/`_sum` come from the counters."""

    def __init__(self, settings: MetricsSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.quantiles = [q for q, _ in settings.summary_quantiles]
        self.windows = {name: WindowedQuantiles(clock=clock) for name in (*SUMMARY_STATISTICS, *CACHE_STATISTICS)}
        self._ordered = [self.windows[name] for name in SUMMARY_STATISTICS]
        self._clock = clock

    def observe(self, *durations_ns: int) -> None:
        """One successful request's durations, in SUMMARY_STATISTICS order, in nanoseconds."""
        now = self._clock()
        for window, ns in zip(self._ordered, durations_ns):
            window.observe(ns / 1000, now)

    def observe_one(self, statistic: str, duration_ns: int) -> None:
        """One duration of `statistic` (e.g. a response cache hit's lookup), in nanoseconds."""
        self.windows[statistic].observe(duration_ns / 1000, self._clock())


# Triton's default buckets of `nv_inference_first_response_histogram_ms`, in milliseconds (then +Inf).
FIRST_RESPONSE_BUCKETS_MS: tuple[float, ...] = (100, 500, 2000, 5000)


class FirstResponseHistogram:
    """Time from a request's arrival to its first response, for a decoupled model: counts per bucket and the sum."""

    def __init__(self, bounds_ms: tuple[float, ...] = FIRST_RESPONSE_BUCKETS_MS) -> None:
        self.bounds_ms = bounds_ms
        self.counts = [0] * (len(bounds_ms) + 1)  # per bucket (the last one: above every bound), not cumulative
        self.sum_ms = 0

    def observe(self, duration_ns: int) -> None:
        """One first response, `duration_ns` after its request arrived (whole milliseconds, as Triton records it)."""
        ms = duration_ns // 1_000_000
        self.counts[bisect.bisect_left(self.bounds_ms, ms)] += 1
        self.sum_ms += ms

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations <= it) per bucket, the last bound +Inf."""
        out, total = [], 0
        for bound, count in zip((*self.bounds_ms, math.inf), self.counts):
            total += count
            out.append((bound, total))
        return out


__all__ = ["FIRST_RESPONSE_BUCKETS_MS", "FirstResponseHistogram", "LatencySummaries", "MetricsSettings",
           "SUMMARY_STATISTICS", "WindowedQuantiles"]
