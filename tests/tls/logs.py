"""Checking the server's rate-limited handshake log lines."""

from __future__ import annotations

import datetime


def assert_logged_at_most_once_a_minute(server, line: str) -> None:
    """`line` is in the server's log, and two such lines are at least 60 s apart (one per client address a minute:
    every failure here comes from 127.0.0.1)."""
    assert server.wait_for_log(line), server.log
    times = [datetime.datetime.strptime(entry[:23], "%Y-%m-%d %H:%M:%S,%f")
             for entry in server.log.splitlines() if line in entry]
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:])]
    assert all(gap >= 60 for gap in gaps), server.log
