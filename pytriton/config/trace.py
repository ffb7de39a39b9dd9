"""Triton's `--trace-config` entries parsed (`TraceConfig`), apart from the tracing machinery in `pytriton.core.trace`
so that `TritonConfig` and `bind` in the user's process validate them without loading the server's core."""

from __future__ import annotations

import dataclasses
from typing import Any

TRACE_LEVELS = ("OFF", "TIMESTAMPS", "TENSORS")
DEFAULT_OTEL_URL = "http://localhost:4318/v1/traces"
DEFAULT_OTEL_RESOURCE = {"service.name": "triton-inference-server"}
_OTEL_BSP = {"bsp_max_queue_size": 2048, "bsp_schedule_delay": 5000, "bsp_max_export_batch_size": 512}


@dataclasses.dataclass
class TraceConfig:
    """What `--trace-config` entries set: the initial trace settings and where traces go."""

    level: list[str] = dataclasses.field(default_factory=lambda: ["OFF"])
    rate: int = 1000
    count: int = -1
    mode: str = "triton"
    file: str = ""
    log_frequency: int = 0
    otel_url: str = DEFAULT_OTEL_URL
    otel_resource: dict[str, str] = dataclasses.field(default_factory=lambda: dict(DEFAULT_OTEL_RESOURCE))
    otel_bsp: dict[str, int] = dataclasses.field(default_factory=lambda: dict(_OTEL_BSP))

    def bsp_invalid(self) -> bool:
        return self.otel_bsp["bsp_max_export_batch_size"] > self.otel_bsp["bsp_max_queue_size"]


def _int(key: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"--trace-config {key}: expected an integer, got '{text}'") from None
    if value < minimum:
        raise ValueError(f"--trace-config {key}: must be {minimum} or more, got {value}")
    return value


def parse_trace_config(entries: list[str] | tuple[str, ...] | None, trace_file: str = "") -> TraceConfig:
    """Parse Triton's `--trace-config` entries: `<setting>=<value>` (level, rate, count, mode; file and log-frequency
    too) or `<mode>,<setting>=<value>` with mode `triton` (file, log-frequency) or `opentelemetry` (url, resource,
    bsp_max_queue_size, bsp_schedule_delay, bsp_max_export_batch_size).

    Raises:
        ValueError: an entry that does not parse, an unknown setting or a bad value; the message names it.
    """
    config = TraceConfig(file=trace_file)
    levels: list[str] = []
    carried = ""  # a mode given alone: the scope of the next entry (a comma-split "triton,file=..." list)
    for entry in entries or ():
        text = entry.strip()
        scope, carried = carried, ""
        if text in ("triton", "opentelemetry") and not scope:
            carried = text
            continue
        if "," in text.split("=", 1)[0]:
            scope, text = text.split(",", 1)
            scope = scope.strip()
            if scope not in ("triton", "opentelemetry"):
                raise ValueError(f"--trace-config {entry!r}: unknown trace mode '{scope}' (triton or opentelemetry)")
        if "=" not in text:
            raise ValueError(f"--trace-config {entry!r}: expected <setting>=<value> or <mode>,<setting>=<value>")
        key, value = (part.strip() for part in text.split("=", 1))
        if key == "log_frequency":  # the trace extension's name for it
            key = "log-frequency"
        if scope == "opentelemetry":
            if key == "url":
                config.otel_url = value if "://" in value else f"http://{value}"
            elif key == "resource":
                name, sep, attr = value.partition("=")
                if not sep or not name:
                    raise ValueError(f"--trace-config opentelemetry,resource: expected <key>=<value>, got '{value}'")
                config.otel_resource[name] = attr
            elif key in _OTEL_BSP:
                config.otel_bsp[key] = _int(f"opentelemetry,{key}", value, 1)
            else:
                raise ValueError(f"--trace-config opentelemetry,{key}: unknown OpenTelemetry trace setting (url, "
                                 "resource, bsp_max_queue_size, bsp_schedule_delay, bsp_max_export_batch_size)")
        elif key == "file" and scope in ("", "triton"):
            config.file = value
        elif key == "log-frequency" and scope in ("", "triton"):
            config.log_frequency = _int("log-frequency", value, 0)
        elif scope == "triton":
            raise ValueError(f"--trace-config triton,{key}: unknown Triton trace setting (file, log-frequency)")
        elif key == "level":
            level = value.upper()
            if level not in TRACE_LEVELS:
                raise ValueError(f"--trace-config level: expected one of {', '.join(TRACE_LEVELS)}, got '{value}'")
            levels.append(level)
        elif key == "rate":
            config.rate = _int("rate", value, 0)
        elif key == "count":
            config.count = _int("count", value, -1)
        elif key == "mode":
            if value not in ("triton", "opentelemetry"):
                raise ValueError(f"--trace-config mode: expected triton or opentelemetry, got '{value}'")
            config.mode = value
        else:
            raise ValueError(f"--trace-config {key}: unknown trace setting (level, rate, count, mode, or "
                             "triton,<file|log-frequency>, opentelemetry,<url|resource|bsp_...>)")
    if carried:
        raise ValueError(f"--trace-config {carried}: expected <setting>=<value> after the mode")
    if levels:
        # As Triton: OFF given with another level leaves the other ones.
        config.level = [lvl for lvl in dict.fromkeys(levels) if lvl != "OFF"] or ["OFF"]
    if config.bsp_invalid():
        raise ValueError("--trace-config opentelemetry,bsp_max_export_batch_size must not exceed bsp_max_queue_size")
    return config


_MODEL_KEYS = {"level": "trace_level", "rate": "trace_rate", "count": "trace_count", "log-frequency": "log_frequency",
               "log_frequency": "log_frequency"}


def model_trace_settings(entries: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`--trace-config`-style entries for one model (`bind(trace_config=...)`) as the trace extension's per-model
    settings: only level, rate, count and log-frequency may differ per model.

    Raises:
        ValueError: an entry that does not parse, or a setting that is the server's (mode, file, OpenTelemetry).
    """
    settings: dict[str, Any] = {}
    for entry in entries:
        key = entry.split("=", 1)[0].strip()
        if key not in _MODEL_KEYS:
            raise ValueError(f"trace setting '{entry}' is not per model (level, rate, count, log-frequency); "
                             "give it to the server: TritonConfig(trace_config=[...]) or pytriton serve --trace-config")
        parsed = parse_trace_config([entry])
        name = _MODEL_KEYS[key]
        if name == "trace_level":
            levels = settings.get("trace_level", []) + parsed.level
            settings[name] = [lvl for lvl in dict.fromkeys(levels) if lvl != "OFF"] or ["OFF"]
        else:
            settings[name] = str({"trace_rate": parsed.rate, "trace_count": parsed.count,
                                  "log_frequency": parsed.log_frequency}[name])
    return settings
