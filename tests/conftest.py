"""Session fixtures: nothing a test started is left behind. The helpers live in tests/_support."""

from __future__ import annotations

import time
from typing import Iterator

import pytest

from tests._support.processes import started_pids
from tests._support.shm import shm_segments_of


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind() -> Iterator[None]:
    """After the session: no process we started is alive and /dev/shm has no segment they owned."""
    yield
    deadline = time.monotonic() + 10
    alive = started_pids.alive()
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = started_pids.alive()
    leftovers = shm_segments_of(set(started_pids))
    if alive:  # report, but do not leave them running
        started_pids.kill_alive()
    assert not alive, f"processes still alive after the tests: {alive}"
    assert not leftovers, f"shared-memory segments left in /dev/shm: {leftovers}"
