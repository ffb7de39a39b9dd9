"""`--trace-config`, `--metrics-config` and `--cache-config`: their parsers take a list of command-line arguments.

An input is the arguments, one per line, decoded as Python decodes command-line arguments on Linux (UTF-8 with
surrogate escapes). The parsers' own error is a ValueError whose message names the option; a result is checked
for what the parser promises (its values in their ranges).
"""

from __future__ import annotations

import math

from pytriton.config.cache import parse_cache_config
from pytriton.config.metrics import MetricsSettings
from pytriton.config.trace import TRACE_LEVELS, model_trace_settings, parse_trace_config
from pytriton.core.settings import TraceSettings
from tests.fuzz.harness import Finding, Harness


def arguments(data: bytes) -> list[str]:
    return data.decode("utf-8", "surrogateescape").split("\n")


def _refused(exc: ValueError, option: str) -> None:
    if option not in str(exc) and "trace setting" not in str(exc):
        raise Finding("ValueError without the option's name", str(exc))


class TraceConfigHarness(Harness):
    name = "trace_config"
    max_len = 512
    memory_fixed = 1 << 20

    def one_input(self, data: bytes) -> None:
        entries = arguments(data)
        try:
            config = parse_trace_config(entries)
        except ValueError as exc:
            _refused(exc, "--trace-config")
        else:
            if not config.level or any(level not in TRACE_LEVELS for level in config.level):
                raise Finding("trace level out of its set", repr(config.level))
            if config.rate < 0 or config.count < -1 or config.log_frequency < 0:
                raise Finding("trace number out of range", repr(config))
            if config.mode not in ("triton", "opentelemetry"):
                raise Finding("trace mode out of its set", config.mode)
            TraceSettings.from_config(config)
        try:  # the same entries given to one model (`bind(trace_config=...)`)
            model_trace_settings(entries)
        except ValueError as exc:
            _refused(exc, "--trace-config")


class MetricsConfigHarness(Harness):
    name = "metrics_config"
    max_len = 512
    memory_fixed = 1 << 20

    def one_input(self, data: bytes) -> None:
        try:
            settings = MetricsSettings.parse(arguments(data))
        except ValueError as exc:
            _refused(exc, "--metrics-config")
            return
        for quantile, error in settings.summary_quantiles:
            if not (0.0 <= quantile <= 1.0 and 0.0 <= error <= 1.0) or math.isnan(quantile + error):
                raise Finding("summary quantile out of [0, 1]", repr(settings.summary_quantiles))


class CacheConfigHarness(Harness):
    name = "cache_config"
    max_len = 512
    memory_fixed = 1 << 20

    def one_input(self, data: bytes) -> None:
        try:
            size = parse_cache_config(arguments(data))
        except ValueError as exc:
            _refused(exc, "--cache-config")
            return
        if size is not None and size < 0:
            raise Finding("negative cache size", str(size))
