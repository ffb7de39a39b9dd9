"""Each replica's server metrics in Ray's metrics export: every `export_period_s` the replica's Prometheus text is
read and each sample set on a `ray.serve.metrics.Gauge` named `pytriton_<family>`, which Serve labels with the
deployment, the replica and the application (Ray's metrics agent on each node serves them to Prometheus). Counters
are exported as gauges holding the counter's value (Prometheus' `rate()` works on them all the same)."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Protocol

logger = logging.getLogger("pytriton.ray")

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
RESERVED_TAGS = ("deployment", "replica", "application")  # Serve's own labels: ours are renamed model_<name>


class _Source(Protocol):
    def metrics(self) -> str: ...


def parse_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of Prometheus text: (name, labels, value); comments and unparsable lines are skipped."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        labels = {k: v for k, v in _LABEL.findall(match.group(2) or "")}
        samples.append((match.group(1), labels, value))
    return samples


class MetricsExport:
    """A thread that copies the replica's metrics into Ray's export until `stop()`."""

    def __init__(self, source: _Source, export_period_s: float):
        self._source = source
        self._period = export_period_s
        self._gauges: dict[tuple[str, tuple[str, ...]], Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pytriton-ray-metrics", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            try:
                self.export_once()
            except Exception as exc:  # noqa: BLE001 - the server stopping under us; say so, try again later
                logger.debug("exporting metrics: %s", exc)

    def export_once(self) -> int:
        """Set every sample of the replica's metrics now; how many were set."""
        from ray.serve import metrics

        count = 0
        for name, labels, value in parse_samples(self._source.metrics()):
            tags = {(f"model_{k}" if k in RESERVED_TAGS else k): v for k, v in labels.items()}
            key = (name, tuple(sorted(tags)))
            gauge = self._gauges.get(key)
            if gauge is None:
                gauge = self._gauges[key] = metrics.Gauge(
                    f"pytriton_{name}", description=f"pytriton server metric {name}", tag_keys=key[1])
            gauge.set(value, tags=tags)
            count += 1
        return count

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(5.0)


__all__ = ["MetricsExport", "parse_samples"]
