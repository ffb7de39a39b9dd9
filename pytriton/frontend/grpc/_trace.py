"""The gRPC front-end's part of a trace: a request's trace begins when its handler starts (GRPC_WAITREAD_START),
joined to the caller's W3C context when its metadata carries a `traceparent`."""

from __future__ import annotations

from typing import Any

from pytriton.core.trace import GRPC_WAITREAD_START, Trace, Tracer, now_ns


def start_trace(tracer: Tracer, request: Any, context: Any) -> Trace | None:
    """The trace of `request` (an InferRequestView) if the tracer samples it, with GRPC_WAITREAD_START stamped."""
    received = now_ns()
    trace = tracer.start(request.model_name, request.model_version, traceparent(context))
    if trace is not None:
        trace.stamp(GRPC_WAITREAD_START, received)
    return trace


def traceparent(context: Any) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "traceparent" and isinstance(value, str):
            return value
    return None
