"""The limits of the gRPC HTTP/2 transport, in one place, and the per-connection rate budgets that enforce them.

Every default is at least as strict as grpcio's server (and Triton's, which raises grpcio's message limits to
2 GiB): docs/security.md lists each one, its CLI option where it has one, and what a client gets past it.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class H2Limits:
    """Bounds on what one client connection can make the server hold or do.

    Attributes:
        max_concurrent_streams: streams open at once (advertised as SETTINGS_MAX_CONCURRENT_STREAMS); more are
            refused with RST_STREAM REFUSED_STREAM. grpcio: unlimited; HTTP/2 suggests at least 100.
        max_header_list_size: decoded request header list, name + value + 32 per field (advertised as
            SETTINGS_MAX_HEADER_LIST_SIZE); a larger list ends the call with RESOURCE_EXHAUSTED. Twice this is a
            hard limit where decoding stops: GOAWAY ENHANCE_YOUR_CALM; so is a compressed block longer than this
            (at least 16 KiB; GOAWAY FRAME_SIZE_ERROR for a single frame). grpcio: 8 KiB soft, 16 KiB hard.
        max_message_bytes: one request message, as declared and after decompression (RESOURCE_EXHAUSTED past it).
            Triton: 2 GiB - 1.
        max_decompressed_bytes: one gzip/deflate request message once decompressed (RESOURCE_EXHAUSTED past it),
            when lower than max_message_bytes. Triton has no separate bound, so a 1 MiB gzip bomb could make it
            inflate 2 GiB; 64 MiB by default here, as the HTTP front-end's body limit.
        initial_window_size: what a client may send ahead, per stream and per connection (refilled as it arrives).
        max_frame_size: the largest frame we accept (SETTINGS_MAX_FRAME_SIZE). DATA is never buffered whole; other
            frames are also bounded by their type (a header-carrying frame by max_header_list_size).
        header_timeout_s: a new connection must send its preface and first request headers, and a header block cut
            into CONTINUATION frames must be completed, within this time (GOAWAY and close otherwise).
        idle_timeout_s: a connection without streams for this long gets GOAWAY NO_ERROR and is closed (clients
            reconnect on their next call). None: never (grpcio's max_connection_idle default).
        buffer_release_s: a connection without streams for this long gives back its read buffer and its spare
            message buffer (it keeps a few KiB).
        min_ping_interval_s, max_ping_strikes: grpcio's ping policy (`grpc.http2.min_ping_interval_without_data_ms`,
            `grpc.http2.max_ping_strikes`; Triton's --grpc-http2-min-recv-ping-interval-without-data and
            --grpc-http2-max-ping-strikes): a PING sooner than this after the previous one, with no HEADERS or DATA
            sent by us in between, is a strike; past max_ping_strikes the connection gets GOAWAY ENHANCE_YOUR_CALM
            "too_many_pings". On a connection without calls, unless keepalive_permit_without_calls, the interval
            is 2 hours instead (as grpcio). 0 strikes: any number (as grpcio; max_pings_per_s still applies).
        keepalive_time_s: a PING is sent to a client we have read nothing from for this long (grpc's
            `grpc.keepalive_time_ms`, Triton's --grpc-keepalive-time); None: never.
        keepalive_timeout_s: a keepalive PING not acknowledged within this closes the connection
            (`grpc.keepalive_timeout_ms`, --grpc-keepalive-timeout).
        keepalive_permit_without_calls: keepalive PINGs are sent, and client PINGs judged by min_ping_interval_s,
            on connections without calls too (`grpc.keepalive_permit_without_calls`).
        max_pings_without_data: keepalive PINGs sent while we send no HEADERS or DATA; then none until we do
            (`grpc.http2.max_pings_without_data`, --grpc-http2-max-pings-without-data); 0: no limit.
        infer_response_compression: "none", "low", "medium" or "high" (Triton's
            --grpc-infer-response-compression-level): ModelInfer and ModelStreamInfer responses to clients whose
            grpc-accept-encoding lists gzip are gzip-compressed at zlib level 1, 6 or 9 (INFER_COMPRESSION_LEVELS).
        max_resets_per_s: RST_STREAM frames per second and connection, those the client sends and the stream errors
            we answer with (rapid reset). A reset call is cancelled at once (its queued request never runs), so
            resets cost no more work than calls and this only stops floods: ordinary clients cancelling on short
            deadlines reach a few thousand per second on one shared connection (16 tritonclient threads with
            0.5-2 ms deadlines: ~1,500/s here), a rapid-reset loop 100,000/s; max_pings_per_s, max_settings_per_s: PING and SETTINGS frames;
            max_empty_frames_per_s: frames that carry nothing (DATA without data or END_STREAM, empty HEADERS or
            CONTINUATION fragments, empty unknown frames). Each is a token bucket holding one second's worth; an
            empty bucket means GOAWAY ENHANCE_YOUR_CALM.
        max_pending_control_frames: control frames (PING and SETTINGS acknowledgements, RST_STREAM) written while
            the client is not reading what we already sent; past it the connection is closed (grpc's
            `grpc.http2.max_pending_induced_frames`, 10000).
        max_stream_requests_in_flight: requests of one ModelStreamInfer stream being served at once; the next one
            is read only when one of them has ended, and the stream's flow-control window is returned only for the
            messages read, so a client that keeps sending is held back by HTTP/2 flow control (with grpcio, by
            grpcio's). grpcio and Triton: unlimited.
    """

    max_concurrent_streams: int = 1024
    max_header_list_size: int = 16 * 1024
    max_message_bytes: int = 2**31 - 1
    max_decompressed_bytes: int = 64 * 1024 * 1024
    initial_window_size: int = 1 << 24
    max_frame_size: int = (1 << 24) - 1
    header_timeout_s: float = 20.0
    idle_timeout_s: float | None = 3600.0
    buffer_release_s: float = 5.0
    min_ping_interval_s: float = 300.0
    max_ping_strikes: int = 2
    max_resets_per_s: int = 10_000
    max_pings_per_s: int = 100
    max_settings_per_s: int = 100
    max_empty_frames_per_s: int = 100
    max_pending_control_frames: int = 10_000
    max_stream_requests_in_flight: int = 128
    keepalive_time_s: float | None = 7200.0
    keepalive_timeout_s: float = 20.0
    keepalive_permit_without_calls: bool = False
    max_pings_without_data: int = 2
    infer_response_compression: str = "none"

    def __post_init__(self) -> None:
        if not 16384 <= self.max_frame_size <= (1 << 24) - 1:
            raise ValueError(f"max_frame_size {self.max_frame_size}: must be within 16384 .. 2^24-1 (RFC 9113 6.5.2)")
        if not 65535 <= self.initial_window_size <= 2**31 - 1:
            raise ValueError(f"initial_window_size {self.initial_window_size}: must be within 65535 .. 2^31-1")
        for name in ("max_concurrent_streams", "max_header_list_size", "max_message_bytes", "max_decompressed_bytes",
                     "max_resets_per_s", "max_pings_per_s", "max_settings_per_s", "max_empty_frames_per_s",
                     "max_pending_control_frames", "max_stream_requests_in_flight"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"{name} {getattr(self, name)}: must be at least 1")
        for name in ("max_ping_strikes", "max_pings_without_data", "min_ping_interval_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} {getattr(self, name)}: must not be negative")
        for name in ("header_timeout_s", "buffer_release_s", "keepalive_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} {getattr(self, name)}: must be positive")
        for name in ("idle_timeout_s", "keepalive_time_s"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ValueError(f"{name} {getattr(self, name)}: must be positive (or None: never)")
        if self.infer_response_compression not in INFER_COMPRESSION_LEVELS:
            raise ValueError(f"infer_response_compression {self.infer_response_compression!r}: expected one of "
                             f"{', '.join(INFER_COMPRESSION_LEVELS)}")

    @property
    def infer_gzip_level(self) -> int | None:
        """The zlib level infer responses are compressed with, None: not compressed."""
        return INFER_COMPRESSION_LEVELS[self.infer_response_compression]

    def grpcio_options(self) -> list[tuple[str, int]]:
        """The same keepalive and ping policy as grpc channel arguments (the grpcio server)."""
        keepalive_ms = KEEPALIVE_DISABLED_MS if self.keepalive_time_s is None else int(self.keepalive_time_s * 1000)
        return [
            ("grpc.keepalive_time_ms", keepalive_ms),
            ("grpc.keepalive_timeout_ms", int(self.keepalive_timeout_s * 1000)),
            ("grpc.keepalive_permit_without_calls", int(self.keepalive_permit_without_calls)),
            ("grpc.http2.max_pings_without_data", self.max_pings_without_data),
            ("grpc.http2.min_ping_interval_without_data_ms", int(self.min_ping_interval_s * 1000)),
            ("grpc.http2.max_ping_strikes", self.max_ping_strikes),
        ]



def keepalive_fields(time_ms: int | None = None, timeout_ms: int | None = None,
                     permit_without_calls: bool | None = None, max_pings_without_data: int | None = None,
                     min_recv_ping_interval_ms: int | None = None, max_ping_strikes: int | None = None
                     ) -> dict[str, Any]:
    """Triton's keepalive and ping settings (milliseconds, as its options and TritonConfig fields) as H2Limits
    fields; those not given (None) are left out. A keepalive time of grpc's INT_MAX or more: no keepalive PINGs."""
    fields: dict[str, Any] = {}
    if time_ms is not None:
        fields["keepalive_time_s"] = None if time_ms >= KEEPALIVE_DISABLED_MS else max(time_ms, 1) / 1000.0
    if timeout_ms is not None:
        fields["keepalive_timeout_s"] = max(timeout_ms, 1) / 1000.0
    if permit_without_calls is not None:
        fields["keepalive_permit_without_calls"] = bool(permit_without_calls)
    if max_pings_without_data is not None:
        fields["max_pings_without_data"] = max_pings_without_data
    if min_recv_ping_interval_ms is not None:
        fields["min_ping_interval_s"] = min_recv_ping_interval_ms / 1000.0
    if max_ping_strikes is not None:
        fields["max_ping_strikes"] = max_ping_strikes
    return fields


KEEPALIVE_DISABLED_MS = 2**31 - 1  # grpc's INT_MAX: no keepalive pings
IDLE_PING_INTERVAL_S = 7200.0  # grpcio's minimum between client PINGs on a connection without calls
# Triton's --grpc-infer-response-compression-level values -> the zlib level of gzip. grpc core keeps zlib's default
# level for every level and uses the level to pick an algorithm among those the client accepts; here gzip is used
# whenever the client accepts it, with the level as zlib's (medium = zlib's default, 6).
INFER_COMPRESSION_LEVELS: dict[str, int | None] = {"none": None, "low": 1, "medium": 6, "high": 9}


class RateBudget:
    """A token bucket: `rate` events per second, at most one second's worth saved up."""

    __slots__ = ("rate", "tokens", "stamp")

    def __init__(self, rate: float):
        self.rate = float(rate)
        self.tokens = float(rate)
        self.stamp = 0.0

    def spend(self, now: float) -> bool:
        """Take one token; False when the bucket is empty (the event is over the rate)."""
        tokens = self.tokens + (now - self.stamp) * self.rate
        if tokens > self.rate:
            tokens = self.rate
        self.stamp = now
        if tokens < 1.0:
            self.tokens = tokens
            return False
        self.tokens = tokens - 1.0
        return True


class PingPolicy:
    """grpcio's server ping policy: PINGs closer than `min_interval_s` (`IDLE_PING_INTERVAL_S` on a connection
    without calls, unless `permit_without_calls`) with nothing sent by us in between are strikes; `too_many` once
    the strikes exceed `max_strikes` (0: never). `answered` also lets keepalive PINGs go out again
    (`max_pings_without_data`)."""

    __slots__ = ("min_interval_s", "max_strikes", "permit_without_calls", "strikes", "last", "answered",
                 "sent_without_data")

    def __init__(self, min_interval_s: float, max_strikes: int, permit_without_calls: bool = False):
        self.min_interval_s = min_interval_s
        self.max_strikes = max_strikes
        self.permit_without_calls = permit_without_calls
        self.strikes = 0
        self.last: float | None = None
        # the Outbox sets `answered` and zeroes `sent_without_data` whenever it sends HEADERS or DATA
        self.answered = False  # we sent HEADERS or DATA since the client's last PING
        self.sent_without_data = 0  # keepalive PINGs we sent since we last sent HEADERS or DATA

    def too_many(self, now: float, idle: bool = False) -> bool:
        """A PING from the client at `now`; `idle`: the connection has no call."""
        interval = IDLE_PING_INTERVAL_S if idle and not self.permit_without_calls else self.min_interval_s
        if self.answered:
            self.answered = False
            self.strikes = 0
        elif self.last is not None and now - self.last < interval:
            self.strikes += 1
        self.last = now
        return bool(self.max_strikes) and self.strikes > self.max_strikes

    def may_send(self, max_without_data: int) -> bool:
        """A keepalive PING may go out (at most `max_without_data` without HEADERS or DATA from us; 0: no limit)."""
        return not max_without_data or self.sent_without_data < max_without_data
