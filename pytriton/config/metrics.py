"""Triton's `--metrics-config KEY=VALUE` settings that pytriton implements, parsed where a configuration is built
(the CLI, `TritonConfig`): a light module, so that the user's process does not load the server's core for it."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

# Triton's default `summary_quantiles` (quantile: allowed rank error).
DEFAULT_QUANTILES: tuple[tuple[float, float], ...] = (
    (0.5, 0.05), (0.9, 0.01), (0.95, 0.001), (0.99, 0.001), (0.999, 0.001))
_SETTINGS = ("counter_latencies", "histogram_latencies", "summary_latencies", "summary_quantiles")


@dataclasses.dataclass(frozen=True)
class MetricsSettings:
    """What `--metrics-config KEY=VALUE` chose (Triton's keys that this server implements)."""

    counter_latencies: bool = True
    histogram_latencies: bool = False
    summary_latencies: bool = False
    summary_quantiles: tuple[tuple[float, float], ...] = DEFAULT_QUANTILES

    @classmethod
    def parse(cls, items: list[str] | tuple[str, ...]) -> MetricsSettings:
        """Settings from Triton's `KEY=VALUE` items; a ValueError names the item that is wrong."""
        values: dict[str, Any] = {}
        for item in items:
            key, sep, value = item.partition("=")
            key, value = key.strip(), value.strip().strip('"')
            if not sep or not key:
                raise ValueError(f"--metrics-config expects KEY=VALUE (e.g. summary_latencies=true), got '{item}'")
            if key not in _SETTINGS:
                raise ValueError(f"--metrics-config: unknown setting '{key}'; this server implements "
                                 f"{', '.join(_SETTINGS)}")
            if key == "summary_quantiles":
                values[key] = _parse_quantiles(value)
            else:
                values[key] = _parse_bool(key, value)
        return cls(**values)


def _parse_bool(key: str, value: str) -> bool:
    lowered = value.lower()
    if lowered in ("true", "1", "on", "yes"):
        return True
    if lowered in ("false", "0", "off", "no"):
        return False
    raise ValueError(f"--metrics-config: {key} expects true or false, got '{value}'")


def _parse_quantiles(value: str) -> tuple[tuple[float, float], ...]:
    pairs = []
    for part in value.split(","):
        quantile, sep, error = part.partition(":")
        try:
            q, e = float(quantile), float(error)
        except ValueError:
            q = e = math.nan
        if not sep or not (0.0 <= q <= 1.0) or not (0.0 <= e <= 1.0):
            raise ValueError(f"--metrics-config: summary_quantiles expects QUANTILE:ERROR pairs between 0 and 1 "
                             f"separated by commas (e.g. 0.5:0.05,0.99:0.001), got '{part}' in '{value}'")
        pairs.append((q, e))
    return tuple(pairs)


__all__ = ["DEFAULT_QUANTILES", "MetricsSettings"]
