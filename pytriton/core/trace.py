"""Request tracing as Triton does it: which requests are traced (level, rate and count, global or per model), the
timestamps each front-end and the core put on them, and the sink finished traces go to (a JSON file, OpenTelemetry).

When no trace is wanted the request path reads one flag, `Tracer.active`, and nothing else.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from typing import Any, Callable, Protocol

from pytriton.core.settings import TRACE_LEVELS, TraceSettings

logger = logging.getLogger("pytriton.core")

# The timestamps of Triton's trace format, in the order a request meets them.
HTTP_RECV_START, HTTP_RECV_END = "HTTP_RECV_START", "HTTP_RECV_END"
GRPC_WAITREAD_START, GRPC_WAITREAD_END = "GRPC_WAITREAD_START", "GRPC_WAITREAD_END"
REQUEST_START, QUEUE_START = "REQUEST_START", "QUEUE_START"
COMPUTE_START, COMPUTE_INPUT_END = "COMPUTE_START", "COMPUTE_INPUT_END"
COMPUTE_OUTPUT_START, COMPUTE_END = "COMPUTE_OUTPUT_START", "COMPUTE_END"
REQUEST_END = "REQUEST_END"
INFER_RESPONSE_COMPLETE = "INFER_RESPONSE_COMPLETE"  # each response of a decoupled model
HTTP_SEND_START, HTTP_SEND_END = "HTTP_SEND_START", "HTTP_SEND_END"
GRPC_SEND_START, GRPC_SEND_END = "GRPC_SEND_START", "GRPC_SEND_END"

DEFAULT_OTEL_URL = "http://localhost:4318/v1/traces"
DEFAULT_OTEL_RESOURCE = {"service.name": "triton-inference-server"}
_OTEL_BSP = {"bsp_max_queue_size": 2048, "bsp_schedule_delay": 5000, "bsp_max_export_batch_size": 512}


def now_ns() -> int:
    """The trace clock: CLOCK_MONOTONIC on Linux (as Triton's steady clock), the same in every process of a host."""
    return time.perf_counter_ns()


# ---- configuration (--trace-config) ------------------------------------------------------------------------------
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

    def settings(self) -> TraceSettings:
        """The run-time trace settings (the trace extension's view) this configuration starts with."""
        settings = TraceSettings(self.file)
        settings.global_values.update({
            "trace_level": list(self.level), "trace_rate": str(self.rate), "trace_count": str(self.count),
            "log_frequency": str(self.log_frequency), "trace_mode": self.mode,
        })
        return settings

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


# ---- traces -------------------------------------------------------------------------------------------------------
class Trace:
    """One traced request: its identity and the (name, ns) timestamps put on it so far."""

    __slots__ = ("id", "model_name", "model_version", "request_id", "parent_id", "timestamps", "traceparent")

    def __init__(self, trace_id: int, model_name: str, model_version: str, traceparent: str | None = None):
        self.id = trace_id
        self.model_name = model_name
        self.model_version = model_version
        self.request_id = ""
        self.parent_id = 0
        self.timestamps: list[tuple[str, int]] = []
        self.traceparent = traceparent  # a client's W3C trace context (OpenTelemetry mode)

    def stamp(self, name: str, ns: int | None = None) -> None:
        self.timestamps.append((name, now_ns() if ns is None else ns))

    def received(self, request: Any, read_end: str) -> None:
        """The front-end has decoded `request` (an InferRequest): stamp `read_end`, take its id, ride along with it."""
        self.stamp(read_end)
        self.request_id = request.id
        request.trace = self

    def stamp_compute(self, start_ns: int, input_ns: int, infer_ns: int, output_ns: int) -> None:
        """The compute timestamps from what the instance measured: when it began and how long each part took."""
        if not start_ns:  # an instance that does not say when it began: count back from now
            start_ns = now_ns() - input_ns - infer_ns - output_ns
        input_end = start_ns + input_ns
        output_start = input_end + infer_ns
        self.timestamps += [(COMPUTE_START, start_ns), (COMPUTE_INPUT_END, input_end),
                            (COMPUTE_OUTPUT_START, output_start), (COMPUTE_END, output_start + output_ns)]


class TraceSink(Protocol):
    """Where finished traces go."""

    def submit(self, trace: Trace) -> None: ...

    def close(self) -> None: ...


class Tracer:
    """Decides which requests are traced, from the run-time `TraceSettings`, and hands finished traces to the sink.

    `active` is the one flag the request path reads: true while some level (global or of a model) is not OFF and a
    sink exists. Rate counts requests per settings scope (a model with its own rate counts its own requests); a
    positive count goes down by one per trace started, as Triton reports it in the settings.
    """

    def __init__(self, settings: TraceSettings, sink: TraceSink | None = None, always_trace_propagated: bool = False):
        self.settings = settings
        self.sink = sink
        self.always_trace_propagated = always_trace_propagated  # OpenTelemetry mode: a client's context is traced
        self.active = False
        self._ids = itertools.count(1)
        self._seen: dict[str | None, int] = {}
        settings.listeners.append(self._refresh)
        self._refresh()

    def attach(self, sink: TraceSink | None, always_trace_propagated: bool = False) -> None:
        """Send finished traces to `sink` from now on (None: trace nothing)."""
        self.sink = sink
        self.always_trace_propagated = always_trace_propagated
        self._refresh()

    def _refresh(self) -> None:
        if self.sink is None:
            self.active = False
            return
        scopes = [self.settings.global_values, *self.settings.model_values.values()]
        self.active = any("trace_level" in s and "OFF" not in s["trace_level"] for s in scopes)
        self._seen.clear()

    def start(self, model_name: str, model_version: str = "", traceparent: str | None = None) -> Trace | None:
        """A new trace for a request to `model_name` if it is to be traced, else None."""
        settings = self.settings
        own = settings.model_values.get(model_name, {})
        glob = settings.global_values
        if "OFF" in own.get("trace_level", glob["trace_level"]):
            return None
        if not (traceparent and self.always_trace_propagated):
            rate_scope = model_name if "trace_rate" in own else None
            rate = int(own.get("trace_rate", glob["trace_rate"]))
            seen = self._seen[rate_scope] = self._seen.get(rate_scope, 0) + 1
            if rate == 0 or seen % rate:
                return None
        count_values = own if "trace_count" in own else glob
        count = int(count_values["trace_count"])
        if count == 0:
            return None
        if count > 0:
            count_values["trace_count"] = str(count - 1)
        return Trace(next(self._ids), model_name, model_version, traceparent)

    def finish(self, trace: Trace) -> None:
        sink = self.sink
        if sink is not None:
            try:
                sink.submit(trace)
            except Exception:  # noqa: BLE001 - a trace never fails a request
                logger.exception("cannot record trace %d", trace.id)

    def close(self) -> None:
        """Flush and close the sink (blocking: writes the last file, exports the last spans)."""
        sink, self.sink = self.sink, None
        self.active = False
        if sink is not None:
            sink.close()


def finish_on_sent(
    tracer: Tracer, trace: Trace, send_end: str, on_sent: Callable[[], None] | None
) -> Callable[[], None]:
    """`on_sent` (a response's release callback, or None) wrapped to stamp `send_end` and finish the trace."""

    def sent() -> None:
        trace.stamp(send_end)
        try:
            if on_sent is not None:
                on_sent()
        finally:
            tracer.finish(trace)

    return sent


__all__ = ["Trace", "TraceConfig", "TraceSink", "Tracer", "parse_trace_config", "model_trace_settings", "finish_on_sent",
           "now_ns"]
