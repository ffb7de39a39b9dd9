"""Triton's CPU gauges (nv_cpu_utilization, nv_cpu_memory_total_bytes, nv_cpu_memory_used_bytes) and `Throttled`,
which reads a gauge source at most once per `--metrics-interval-ms` as Triton polls its CPU and GPU metrics."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import Metric


class _CpuSampler:
    """CPU utilisation of the machine between two readings, from /proc/stat."""

    def __init__(self) -> None:
        self._last = self._read()

    @staticmethod
    def _read() -> tuple[int, int] | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    def utilization(self) -> float:
        now = self._read()
        last, self._last = self._last, now
        if now is None or last is None or now[0] == last[0]:
            return 0.0
        total, idle = now[0] - last[0], now[1] - last[1]
        return max(0.0, min(1.0, 1.0 - idle / total))


def _memory() -> tuple[int, int]:
    info = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                info[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return 0, 0
    total = info.get("MemTotal", 0)
    return total, total - info.get("MemAvailable", 0)


class CpuMetricsSource:
    """Triton's CPU gauges of this machine, read at each `collect()`."""

    def __init__(self) -> None:
        self.cpu = _CpuSampler()

    def collect(self) -> Iterator[Metric]:
        cpu = Metric("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", "gauge")
        cpu.add_sample("nv_cpu_utilization", {}, self.cpu.utilization())
        yield cpu
        total, used = _memory()
        mem_total = Metric("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", "gauge")
        mem_total.add_sample("nv_cpu_memory_total_bytes", {}, total)
        yield mem_total
        mem_used = Metric("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", "gauge")
        mem_used.add_sample("nv_cpu_memory_used_bytes", {}, used)
        yield mem_used


class Throttled:
    """A collector over `source` that reads it at most once per `interval_s` (the first scrape reads it); scrapes in
    between get the families of the last reading, as Triton's gauges change only when it polls them."""

    def __init__(self, source: Any, interval_s: float, clock: Callable[[], float] = time.monotonic):
        self.source = source
        self.interval_s = interval_s
        self._clock = clock
        self._families: list[Metric] = []
        self._read_at = -math.inf
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            now = self._clock()
            if now - self._read_at >= self.interval_s:
                self._families = list(self.source.collect())
                self._read_at = now
            families = list(self._families)
        yield from families


__all__ = ["CpuMetricsSource", "Throttled"]
