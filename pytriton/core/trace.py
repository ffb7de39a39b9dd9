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

from pytriton.config.trace import TraceConfig, model_trace_settings, parse_trace_config
from pytriton.core.settings import TraceSettings

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

def now_ns() -> int:
    """The trace clock: CLOCK_MONOTONIC on Linux (as Triton's steady clock), the same in every process of a host."""
    return time.perf_counter_ns()


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



def stamp_execution(trace: Trace, stats: Any) -> None:
    """An execution's compute timestamps (its `ExecutionStats`) in a trace."""
    trace.stamp_compute(stats.compute_start_ns, stats.compute_input_ns, stats.compute_infer_ns, stats.compute_output_ns)


def stamp_stream_delivery(trace: Trace, item: Any) -> None:
    """A decoupled model's execution in a trace (one `Delivery` at a time): COMPUTE_START with its first message,
    INFER_RESPONSE_COMPLETE per response, COMPUTE_END with its final message."""
    stats = item.stats
    if trace.timestamps[-1][0] == QUEUE_START:  # the first message
        trace.stamp(COMPUTE_START, stats.compute_start_ns or None)
    if item.result is not None:
        trace.stamp(INFER_RESPONSE_COMPLETE)
    if item.final:
        trace.stamp(COMPUTE_END)

__all__ = ["stamp_execution", "stamp_stream_delivery", "Trace", "TraceConfig", "TraceSink", "Tracer", "parse_trace_config", "model_trace_settings", "finish_on_sent",
           "now_ns"]
