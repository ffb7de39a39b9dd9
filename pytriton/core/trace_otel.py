"""Trace mode `opentelemetry`: each finished trace becomes spans exported over OTLP/HTTP (the `otel` extra), joined to
the client's trace when the request carried a W3C `traceparent`.

As Triton: a top-level span `InferRequest` (front-end receive/send events), a span named after the model (request
and queue events, model attributes) and a `compute` span (compute events).
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from typing import Any

from pytriton.core.trace import (
    COMPUTE_END,
    COMPUTE_START,
    REQUEST_END,
    REQUEST_START,
    Trace,
    TraceConfig,
    now_ns,
)

logger = logging.getLogger("pytriton.core")

OTEL_EXTRA_HINT = ("trace mode 'opentelemetry' needs the OpenTelemetry SDK and its OTLP/HTTP exporter: "
                   "pip install 'pytriton[otel]'")
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_COMPUTE = {"COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"}
_MODEL = {"REQUEST_START", "QUEUE_START", "REQUEST_END"}


def parse_traceparent(value: str) -> tuple[int, int, int] | None:
    """(trace id, parent span id, flags) of a W3C `traceparent` header, or None when it is not a valid one."""
    match = _TRACEPARENT.match(value.strip().lower())
    if match is None or match.group(1) == "ff":
        return None
    trace_id, span_id = int(match.group(2), 16), int(match.group(3), 16)
    if not trace_id or not span_id:
        return None
    return trace_id, span_id, int(match.group(4), 16)


class OtelSpanExporter:
    """The `TraceSink` of mode `opentelemetry`: a tracer provider with a batch span processor and an OTLP/HTTP
    exporter to `config.otel_url`. Spans are built by a thread of this exporter, exported by the SDK's thread."""

    def __init__(self, config: TraceConfig):
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise RuntimeError(f"{OTEL_EXTRA_HINT} ({exc})") from None
        from opentelemetry import trace as otel_trace

        self._api = otel_trace
        bsp = config.otel_bsp
        self.provider = TracerProvider(resource=Resource.create(dict(config.otel_resource)))
        self.provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=config.otel_url),
            max_queue_size=bsp["bsp_max_queue_size"],
            schedule_delay_millis=bsp["bsp_schedule_delay"],
            max_export_batch_size=bsp["bsp_max_export_batch_size"],
        ))
        self.tracer = self.provider.get_tracer("pytriton")
        self._traces: queue.Queue[Trace | None] = queue.Queue(bsp["bsp_max_queue_size"])
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="pytriton-trace-spans", daemon=True)
        self._thread.start()

    def _parent_context(self, traceparent: str | None) -> Any:
        parsed = parse_traceparent(traceparent) if traceparent else None
        if parsed is None:
            return None
        trace_id, span_id, flags = parsed
        api = self._api
        remote = api.SpanContext(trace_id, span_id, is_remote=True, trace_flags=api.TraceFlags(flags))
        return api.set_span_in_context(api.NonRecordingSpan(remote))

    def submit(self, trace: Trace) -> None:
        """Queue `trace`: its spans are built by this exporter's thread (the SDK takes ~80 µs for one trace). When
        the thread is bsp_max_queue_size traces behind, the trace is dropped (as the SDK drops spans)."""
        try:
            self._traces.put_nowait(trace)
        except queue.Full:
            if not self.dropped:
                logger.warning("OpenTelemetry spans are built slower than requests are traced; traces are dropped "
                               "(lower the trace rate)")
            self.dropped += 1

    def _run(self) -> None:
        while (trace := self._traces.get()) is not None:
            try:
                self._export(trace)
            except Exception:  # noqa: BLE001 - a trace never stops the exporter
                logger.exception("cannot export trace %d", trace.id)

    def _export(self, trace: Trace) -> None:
        if not trace.timestamps:
            return
        offset = time.time_ns() - now_ns()  # trace clock (monotonic) -> the wall clock OpenTelemetry uses
        stamps = [(name, ns + offset) for name, ns in trace.timestamps]
        at = dict(stamps)
        api = self._api
        first, last = min(ns for _, ns in stamps), max(ns for _, ns in stamps)
        root = self.tracer.start_span("InferRequest", context=self._parent_context(trace.traceparent),
                                      kind=api.SpanKind.SERVER, start_time=first)
        model = self.tracer.start_span(trace.model_name, context=api.set_span_in_context(root),
                                       start_time=at.get(REQUEST_START, first))
        model.set_attributes({
            "triton.model_name": trace.model_name, "triton.model_version": trace.model_version,
            "triton.trace_id": trace.id, "triton.trace_parent_id": trace.parent_id,
            "triton.request_id": trace.request_id,
        })
        compute = None
        if COMPUTE_START in at:
            compute = self.tracer.start_span("compute", context=api.set_span_in_context(model),
                                             start_time=at[COMPUTE_START])
        for name, ns in stamps:
            span = compute if name in _COMPUTE and compute is not None else model if name in _MODEL else root
            span.add_event(name, timestamp=ns)
        if compute is not None:
            compute.end(end_time=at.get(COMPUTE_END, at[COMPUTE_START]))
        model.end(end_time=at.get(REQUEST_END, last))
        root.end(end_time=last)

    def close(self) -> None:
        """Build the spans still queued, then export what the batch processor holds and stop it."""
        self._traces.put(None)  # (waits for room: the thread is taking traces)
        self._thread.join()
        self.provider.shutdown()


__all__ = ["OtelSpanExporter", "OTEL_EXTRA_HINT", "parse_traceparent"]
