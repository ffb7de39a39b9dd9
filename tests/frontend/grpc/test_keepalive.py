"""Keepalive PINGs and grpcio's ping policy on the HTTP/2 transport, with raw frames and scaled-down times: the
server pings a quiet client and keeps it while it answers, drops one that does not within the keepalive timeout,
sends no PING without calls unless permitted nor more than max_pings_without_data without sending data, and
counts client PINGs closer than the allowed interval as strikes (GOAWAY ENHANCE_YOUR_CALM "too_many_pings").
Through grpcio and the CLI: tests/frontend/grpc/test_keepalive_e2e.py."""

from __future__ import annotations

import time

import pytest

from pytriton.config.h2 import H2Limits, PingPolicy, keepalive_fields
from tests.frontend.grpc.inproc import InProcessServer, echo_works, request, wait_until
from tests.frontend.grpc.raw_h2 import (
    ACK,
    ENHANCE_YOUR_CALM,
    GOAWAY,
    PING,
    Frame,
    RawH2,
    grpc_message,
    ping,
)


def fast(**fields: object) -> H2Limits:
    """Keepalive in tenths of a second (the idle timeout out of the way)."""
    values: dict = {"keepalive_time_s": 0.3, "keepalive_timeout_s": 5.0, "keepalive_permit_without_calls": True,
                    "max_pings_without_data": 0, "idle_timeout_s": None, **fields}
    return H2Limits(**values)


def server_ping(raw: RawH2, timeout_s: float = 5.0) -> Frame:
    """The next PING the server sends (not an acknowledgement)."""
    return raw.wait_for(lambda f: f.type == GOAWAY or (f.type == PING and not f.flags & ACK), "a server PING",
                        timeout_s)


def no_server_ping_for(raw: RawH2, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            item = raw.read_frame(left)
        except TimeoutError:
            return
        assert item is not None, "the connection closed"
        assert not (item.type == PING and not item.flags & ACK), f"a server PING within {seconds} s"


def test_a_client_that_answers_keeps_its_connection():
    """Each PING comes a keepalive time after the last bytes read; acknowledged, the connection goes on and serves."""
    with InProcessServer(fast()) as server, RawH2(server.port) as raw:
        raw.handshake()
        for _ in range(4):
            start = time.monotonic()
            item = server_ping(raw)
            assert item.type == PING and len(item.payload) == 8
            assert time.monotonic() - start >= 0.2  # not sooner than the keepalive time (less what reading took)
            raw.send(ping(item.payload, ack=True))
        echo_works(raw, 1)
        (connection,) = server.connections
        assert connection.keepalive.sent >= 4


@pytest.mark.parametrize("time_s, timeout_s", [(0.3, 0.5), (1.0, 1.0)])
def test_a_client_that_does_not_answer_is_dropped(time_s, timeout_s):
    """A peer that never acknowledges is closed after keepalive time + timeout (GOAWAY, then the socket closes)."""
    with InProcessServer(fast(keepalive_time_s=time_s, keepalive_timeout_s=timeout_s)) as server:
        with RawH2(server.port) as raw:
            raw.handshake()
            quiet_since = time.monotonic()  # the handshake's SETTINGS ack was the last thing sent
            server_ping(raw)
            item = raw.wait_for(lambda f: f.type == GOAWAY, "GOAWAY", time_s + timeout_s + 5)
            assert b"keepalive" in item.payload[8:]
            raw.expect_closed()
            took = time.monotonic() - quiet_since
            assert time_s + timeout_s - 0.1 <= took <= time_s + timeout_s + 3.0, took  # margin for a busy machine
        wait_until(server, lambda: not server.connections, "the server forgets the connection", 5.0)


def test_data_from_the_client_postpones_the_ping():
    """Keepalive time counts from the last bytes read: a client that keeps talking is not pinged."""
    with InProcessServer(fast(keepalive_time_s=0.6)) as server, RawH2(server.port) as raw:
        raw.handshake()
        for stream_id in range(1, 12, 2):  # a call every 0.2 s for over 1 s
            time.sleep(0.2)
            raw.headers(stream_id, request(raw, "/t.S/Echo"), end_stream=False)
            raw.data(stream_id, grpc_message(b"x"))
            _, _, trailers = raw.answer(stream_id)
            assert trailers["grpc-status"] == "0"
        (connection,) = server.connections
        assert connection.keepalive.sent == 0


def test_no_ping_without_calls_unless_permitted():
    """keepalive_permit_without_calls false: no PING while the connection has no call; a call open gets one."""
    with InProcessServer(fast(keepalive_permit_without_calls=False)) as server, RawH2(server.port) as raw:
        raw.handshake()
        no_server_ping_for(raw, 1.2)
        raw.headers(1, request(raw, "/t.S/Hold"), end_stream=False)
        raw.data(1, grpc_message(b"x"))
        assert server_ping(raw).type == PING


def test_at_most_max_pings_without_data():
    """max_pings_without_data 2: two PINGs, then none until the server sends data (a call's answer)."""
    with InProcessServer(fast(max_pings_without_data=2)) as server, RawH2(server.port) as raw:
        raw.handshake()
        for _ in range(2):
            raw.send(ping(server_ping(raw).payload, ack=True))
        no_server_ping_for(raw, 1.2)
        echo_works(raw, 1)  # HEADERS and DATA sent: PINGs may go out again
        assert server_ping(raw).type == PING


def test_keepalive_time_none_sends_no_ping():
    with InProcessServer(fast(keepalive_time_s=None)) as server, RawH2(server.port) as raw:
        raw.handshake()
        no_server_ping_for(raw, 1.0)


# ---- client PINGs: grpcio's ping policy --------------------------------------------------------------------------


def too_many_pings(raw: RawH2) -> None:
    item = raw.expect_connection_error(ENHANCE_YOUR_CALM)
    assert item.payload[8:] == b"too_many_pings"


@pytest.mark.parametrize("strikes", [1, 3])
def test_pings_faster_than_allowed_get_goaway_after_the_strikes(strikes):
    """PINGs sooner than min_ping_interval_s: the first is free, the next `strikes` are strikes, one more gets
    GOAWAY ENHANCE_YOUR_CALM "too_many_pings"."""
    with InProcessServer(fast(min_ping_interval_s=10.0, max_ping_strikes=strikes)) as server:
        with RawH2(server.port) as raw:
            raw.handshake()
            for _ in range(strikes + 1):
                raw.send(ping())
                raw.expect_ping_ack()
            raw.send(ping())
            too_many_pings(raw)


def test_pings_at_the_allowed_interval_are_fine():
    with InProcessServer(fast(min_ping_interval_s=0.2, max_ping_strikes=1, keepalive_time_s=None)) as server:
        with RawH2(server.port) as raw:
            raw.handshake()
            for _ in range(6):
                raw.send(ping())
                raw.expect_ping_ack()
                time.sleep(0.25)
            echo_works(raw, 1)


def test_without_calls_pings_need_permission():
    """keepalive_permit_without_calls false: on a connection without calls a client may PING once per 2 hours, so
    PINGs at the allowed interval still strike out; with a call open, the interval applies."""
    limits = fast(min_ping_interval_s=0.1, max_ping_strikes=1, keepalive_permit_without_calls=False,
                  keepalive_time_s=None)
    with InProcessServer(limits) as server:
        with RawH2(server.port) as raw:
            raw.handshake()
            raw.headers(1, request(raw, "/t.S/Hold"), end_stream=False)  # a call in progress
            raw.data(1, grpc_message(b"x"))
            for _ in range(4):
                time.sleep(0.15)
                raw.send(ping())
                raw.expect_ping_ack()
        with RawH2(server.port) as raw:
            raw.handshake()
            for _ in range(2):
                time.sleep(0.15)
                raw.send(ping())
                raw.expect_ping_ack()
            time.sleep(0.15)  # the client's pace (past the interval, so only the 2 hours without calls refuse it)
            raw.send(ping())
            too_many_pings(raw)


def test_zero_strikes_means_any_number():
    with InProcessServer(fast(min_ping_interval_s=10.0, max_ping_strikes=0)) as server, RawH2(server.port) as raw:
        raw.handshake()
        for _ in range(20):
            raw.send(ping())
            raw.expect_ping_ack()
        echo_works(raw, 1)


def test_ping_policy_idle_interval():
    policy = PingPolicy(min_interval_s=1.0, max_strikes=1)
    assert [policy.too_many(t, idle=True) for t in (0.0, 10.0, 20.0)] == [False, False, True]
    permitted = PingPolicy(min_interval_s=1.0, max_strikes=1, permit_without_calls=True)
    assert not any(permitted.too_many(t, idle=True) for t in (0.0, 10.0, 20.0, 30.0))


def test_keepalive_fields_from_tritons_milliseconds():
    assert keepalive_fields() == {}
    fields = keepalive_fields(1500, 250, True, 0, 300_000, 0)
    assert H2Limits(**fields) == H2Limits(keepalive_time_s=1.5, keepalive_timeout_s=0.25,
                                          keepalive_permit_without_calls=True, max_pings_without_data=0,
                                          min_ping_interval_s=300.0, max_ping_strikes=0)
    assert keepalive_fields(2**31 - 1)["keepalive_time_s"] is None  # grpc's INT_MAX: disabled
    defaults = dict(H2Limits().grpcio_options())
    assert defaults == {  # Triton's (and grpc core's server) defaults
        "grpc.keepalive_time_ms": 7_200_000, "grpc.keepalive_timeout_ms": 20_000,
        "grpc.keepalive_permit_without_calls": 0, "grpc.http2.max_pings_without_data": 2,
        "grpc.http2.min_ping_interval_without_data_ms": 300_000, "grpc.http2.max_ping_strikes": 2,
    }
    with pytest.raises(ValueError, match="keepalive_timeout_s"):
        H2Limits(keepalive_timeout_s=0)
    with pytest.raises(ValueError, match="infer_response_compression"):
        H2Limits(infer_response_compression="max")
