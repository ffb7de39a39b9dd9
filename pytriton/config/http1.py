"""Every bound of the HTTP/1.1 server in one place: what a client may send, how long it may take, and what it gets
past a bound. docs/security.md ("HTTP/1.1: the HTTP and metrics ports") lists them with their options."""

from __future__ import annotations

import dataclasses

KiB = 1024
MiB = 1024 * KiB


@dataclasses.dataclass(frozen=True)
class HttpLimits:
    """Limits of one HTTP/1.1 port (the metrics port uses the same with a small body limit).

    Attributes:
        max_input_bytes: largest request body, after decompression too (`--http-max-input-size`, Triton's
            option and default); past it the client gets 413.
        max_header_bytes: largest request head, request line and header fields together; also the most a chunked
            body holds between two chunks' data (a size line) or after the last (the trailer fields)
            (`--http-max-header-size`; 64 KiB: room for forwarded headers, where h11 stops at 16 KiB and nginx at
            32 KiB); past it 431 and the connection is closed.
        max_header_count: most header fields in one request (`--http-max-header-count`; 100 as Apache's
            LimitRequestFields); past it 431 and the connection is closed.
        header_timeout_s: the whole head of a request must arrive within this many seconds of its first byte
            (`--http-header-timeout`); else 408 and the connection is closed (slowloris).
        body_timeout_s: a request body, or an answer the client is taking, may stall this long
            (`--http-body-timeout`); else 408 (body) or the connection is dropped (answer).
        idle_timeout_s: a keep-alive connection with no request under way is closed after this many seconds
            (`--http-idle-timeout`). 60 s: clients that reuse connections (tritonclient, perf_analyzer) send
            far more often, and check a pooled connection before reusing it.
        max_pipelined: requests read ahead on one connection before it stops reading until answers have
            left (not an option).
        max_buffered_bytes: request body bytes all connections of the port together may hold in memory (being
            received, waiting in their pipelines, in their handlers) before connections stop reading until memory
            frees (`--http-max-buffered-bytes`; `budget.py`). 256 MiB: four requests of the default
            `max_input_bytes` at once, so ordinary large requests only wait when many arrive together.
    """

    max_input_bytes: int = 64 * MiB
    max_header_bytes: int = 64 * KiB
    max_header_count: int = 100
    header_timeout_s: float = 30.0
    body_timeout_s: float = 60.0
    idle_timeout_s: float = 60.0
    max_pipelined: int = 32
    max_buffered_bytes: int = 256 * MiB

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if getattr(self, field.name) <= 0:
                raise ValueError(f"HTTP limit '{field.name}' must be positive, got {getattr(self, field.name)}")

    @property
    def tick_s(self) -> float:
        """How often the listener checks its connections' deadlines: a deadline is kept to within this."""
        return min(1.0, self.header_timeout_s / 4, self.body_timeout_s / 4, self.idle_timeout_s / 4)
