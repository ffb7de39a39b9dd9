"""The stream state table, the rate budgets and the ping policy, driven directly (no sockets)."""

from __future__ import annotations

import itertools

import pytest

from pytriton.config.h2 import H2Limits, PingPolicy, RateBudget
from pytriton.frontend.h2.frames import (
    INTERNAL_ERROR,
    PROTOCOL_ERROR,
    STREAM_CLOSED,
    H2ConnectionError,
    H2StreamError,
)
from pytriton.frontend.h2.stream import (
    CLOSED,
    CLOSED_RESET_BY_PEER,
    CLOSED_RESET_BY_US,
    CLOSED_UNKNOWN,
    HALF_CLOSED_LOCAL,
    HALF_CLOSED_REMOTE,
    HALF_CLOSED_REMOTE_REPLYING,
    IDLE,
    OPEN,
    OPEN_REPLYING,
    RECV_DATA,
    RECV_END_STREAM,
    RECV_HEADERS,
    RECV_PRIORITY,
    RECV_RST_STREAM,
    RECV_WINDOW_UPDATE,
    SEND_DATA,
    SEND_END_STREAM,
    SEND_HEADERS,
    SEND_RST_STREAM,
    STATE_NAMES,
    TRANSITIONS,
    ClosedStreams,
    transition,
)

RECEIVED = (RECV_HEADERS, RECV_DATA, RECV_END_STREAM, RECV_RST_STREAM, RECV_WINDOW_UPDATE, RECV_PRIORITY)
SENT = (SEND_HEADERS, SEND_DATA, SEND_END_STREAM, SEND_RST_STREAM)


def run(state: int, *events: int) -> int:
    for event in events:
        state = transition(1, state, event)
    return state


def test_a_unary_call():
    """Request headers, a message and END_STREAM in; response headers, a message, trailers out: closed."""
    state = run(IDLE, RECV_HEADERS, RECV_DATA, RECV_END_STREAM)
    assert state == HALF_CLOSED_REMOTE
    assert run(state, SEND_HEADERS, SEND_DATA, SEND_DATA, SEND_END_STREAM) == CLOSED
    assert run(IDLE, RECV_HEADERS, RECV_END_STREAM, SEND_HEADERS, SEND_END_STREAM) == CLOSED  # trailers-only


def test_an_early_answer_then_the_reset_that_follows_it():
    """A call answered while the client still sends (an error, a bidi stream's end): half-closed (local), and the
    RST_STREAM NO_ERROR we send then closes it; what the client had in flight is ignored."""
    state = run(IDLE, RECV_HEADERS, RECV_DATA, SEND_HEADERS, SEND_END_STREAM)
    assert state == HALF_CLOSED_LOCAL
    assert run(state, RECV_DATA, RECV_WINDOW_UPDATE) == HALF_CLOSED_LOCAL
    state = run(state, SEND_RST_STREAM)
    assert state == CLOSED_RESET_BY_US
    assert run(state, RECV_DATA, RECV_HEADERS, RECV_RST_STREAM, RECV_WINDOW_UPDATE, RECV_PRIORITY) == state


def test_what_the_rfc_calls_errors():
    with pytest.raises(H2ConnectionError) as info:  # 5.1 idle: anything but HEADERS or PRIORITY
        transition(1, IDLE, RECV_DATA)
    assert info.value.code == PROTOCOL_ERROR
    for event in (RECV_DATA, RECV_HEADERS):  # 5.1 half-closed (remote): a stream error STREAM_CLOSED
        with pytest.raises(H2StreamError) as stream_error:
            transition(1, HALF_CLOSED_REMOTE_REPLYING, event)
        assert stream_error.value.code == STREAM_CLOSED and stream_error.value.stream_id == 1
    with pytest.raises(H2ConnectionError) as info:  # 5.1 closed: HEADERS after END_STREAM both ways
        transition(3, CLOSED, RECV_HEADERS)
    assert info.value.code == STREAM_CLOSED and "stream 3" in str(info.value)
    with pytest.raises(H2StreamError):  # 5.1 closed: DATA after the client's RST_STREAM
        transition(1, CLOSED_RESET_BY_PEER, RECV_DATA)
    with pytest.raises(H2ConnectionError) as info:  # 5.1.1: a new stream below the highest id
        transition(1, CLOSED_UNKNOWN, RECV_HEADERS)
    assert info.value.code == PROTOCOL_ERROR
    with pytest.raises(H2ConnectionError) as info:  # our own mistake: DATA before response headers
        transition(1, OPEN, SEND_DATA)
    assert info.value.code == INTERNAL_ERROR


def test_every_pair_is_in_the_table_or_an_error():
    """Each (state, event) either has an entry or raises, received events as PROTOCOL_ERROR, sent ones as
    INTERNAL_ERROR; frames the RFC says to ignore on closed streams leave the state as it is."""
    for state, event in itertools.product(range(len(STATE_NAMES)), RECEIVED + SENT):
        if state << 4 | event in TRANSITIONS:
            try:
                transition(1, state, event)
            except (H2StreamError, H2ConnectionError):
                pass
            continue
        with pytest.raises(H2ConnectionError) as info:
            transition(1, state, event)
        assert info.value.code == (INTERNAL_ERROR if event in SENT else PROTOCOL_ERROR), (state, event)
    for state in (CLOSED, CLOSED_RESET_BY_PEER, CLOSED_RESET_BY_US, CLOSED_UNKNOWN):
        for event in (RECV_WINDOW_UPDATE, RECV_PRIORITY, RECV_RST_STREAM):
            assert transition(1, state, event) == state
    for state in (OPEN, OPEN_REPLYING, HALF_CLOSED_REMOTE, HALF_CLOSED_REMOTE_REPLYING, HALF_CLOSED_LOCAL):
        assert transition(1, state, RECV_RST_STREAM) == CLOSED_RESET_BY_PEER
        assert transition(1, state, SEND_RST_STREAM) == CLOSED_RESET_BY_US


def test_closed_streams_are_remembered_within_a_bound():
    closed = ClosedStreams(size=4)
    for stream_id in range(1, 20, 2):
        closed.add(stream_id, CLOSED)
    assert closed.state(19, last_stream_id=19) == CLOSED
    assert closed.state(1, last_stream_id=19) == CLOSED_UNKNOWN  # forgotten
    assert closed.state(21, last_stream_id=19) == IDLE
    assert closed.state(4, last_stream_id=19) == IDLE  # a server-side id: never opened by the client


def test_rate_budget_holds_one_second():
    budget = RateBudget(10)
    assert all(budget.spend(100.0) for _ in range(10))
    assert not budget.spend(100.0)
    assert budget.spend(100.15)  # one more token after a tenth of a second (and a half)
    assert not budget.spend(100.15)
    assert sum(budget.spend(200.0) for _ in range(50)) == 10  # no more than one second's worth saved up


def test_ping_policy_as_grpcio():
    policy = PingPolicy(min_interval_s=300.0, max_strikes=2)
    assert [policy.too_many(t) for t in (0.0, 1.0, 2.0)] == [False, False, False]  # strikes 0, 1, 2
    policy.answered = True  # we sent data: the count starts again
    assert [policy.too_many(t) for t in (3.0, 4.0, 5.0, 6.0)] == [False, False, False, True]
    slow = PingPolicy(min_interval_s=300.0, max_strikes=2)
    assert not any(slow.too_many(t) for t in (0.0, 301.0, 602.0, 903.0))  # far enough apart


def test_limits_are_checked():
    with pytest.raises(ValueError, match="max_frame_size"):
        H2Limits(max_frame_size=1000)
    with pytest.raises(ValueError, match="idle_timeout_s"):
        H2Limits(idle_timeout_s=0)
    assert H2Limits(idle_timeout_s=None).idle_timeout_s is None
