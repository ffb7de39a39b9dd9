"""Session hooks and fixtures: the checkout byte-compiled once, nothing a test started left behind. The helpers live
in tests/_support."""

from __future__ import annotations

import compileall
import re
import sys
import time
from typing import Iterator

import pytest

from tests._support.paths import REPO
from tests._support.processes import started_pids
from tests._support.shm import shm_segments_of

COMPILED = ("pytriton", "tests", "examples")
"""The checkout's packages that the servers, workers and describe processes the tests start import."""
MODEL_REPOSITORIES = re.compile(r"/tests/repositories/")


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the checkout once per run (the controller, before xdist starts its workers): the suite starts
    hundreds of processes that import pytriton, and where PYTHONDONTWRITEBYTECODE is set none of them keeps what it
    compiled, so each compiles every module from source again (a third of a server's start-up CPU time). Only files
    changed since their last compilation are compiled; the model repositories are left as they are (a model folder
    holds what its test put there). The test processes themselves write bytecode too: pytest then keeps the test
    modules it rewrote for its assertions instead of rewriting all of them in each worker at each run (6 of the 9 s
    of CPU a collection takes)."""
    sys.dont_write_bytecode = False  # this process (each xdist worker too) keeps its assertion-rewritten test modules
    if hasattr(config, "workerinput"):  # an xdist worker: its controller did the rest
        return
    for package in COMPILED:
        compileall.compile_dir(REPO / package, quiet=2, rx=MODEL_REPOSITORIES)


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
