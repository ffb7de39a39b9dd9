"""The limits of the gRPC HTTP/2 transport, in one place, and the per-connection rate budgets that enforce them.

Every default is at least as strict as grpcio's server (and Triton's, which raises grpcio's message limits to
2 GiB): docs/security.md lists each one, its CLI option where it has one, and what a client gets past it.
"""

from __future__ import annotations

import dataclasses


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
            `grpc.http2.max_ping_strikes`): a PING sooner than this after the previous one, with no HEADERS or DATA
            sent by us in between, is a strike; past max_ping_strikes the connection gets GOAWAY ENHANCE_YOUR_CALM
            "too_many_pings".
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

    def __post_init__(self) -> None:
        if not 16384 <= self.max_frame_size <= (1 << 24) - 1:
            raise ValueError(f"max_frame_size {self.max_frame_size}: must be within 16384 .. 2^24-1 (RFC 9113 6.5.2)")
        if not 65535 <= self.initial_window_size <= 2**31 - 1:
            raise ValueError(f"initial_window_size {self.initial_window_size}: must be within 65535 .. 2^31-1")
        for name in ("max_concurrent_streams", "max_header_list_size", "max_message_bytes", "max_decompressed_bytes",
                     "max_ping_strikes",
                     "max_resets_per_s", "max_pings_per_s", "max_settings_per_s", "max_empty_frames_per_s",
                     "max_pending_control_frames", "max_stream_requests_in_flight"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"{name} {getattr(self, name)}: must be at least 1")
        for name in ("header_timeout_s", "buffer_release_s", "min_ping_interval_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} {getattr(self, name)}: must be positive")
        if self.idle_timeout_s is not None and self.idle_timeout_s <= 0:
            raise ValueError(f"idle_timeout_s {self.idle_timeout_s}: must be positive (or None: no idle timeout)")


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
    """grpcio's server ping policy: PINGs closer than `min_interval_s` with nothing sent by us in between are
    strikes; `too_many` once the strikes exceed `max_strikes`."""

    __slots__ = ("min_interval_s", "max_strikes", "strikes", "last", "answered")

    def __init__(self, min_interval_s: float, max_strikes: int):
        self.min_interval_s = min_interval_s
        self.max_strikes = max_strikes
        self.strikes = 0
        self.last: float | None = None
        self.answered = False  # we sent HEADERS or DATA since the last PING

    def too_many(self, now: float) -> bool:
        if self.answered:
            self.answered = False
            self.strikes = 0
        elif self.last is not None and now - self.last < self.min_interval_s:
            self.strikes += 1
        self.last = now
        return self.strikes > self.max_strikes
