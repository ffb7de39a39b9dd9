"""Wait for an event (a condition that the server or a worker makes true, a file it writes), never for a guessed
duration: the bound only ends a broken run. For a server's log line, `ServerProcess.wait_for_log`."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Callable

DEFAULT_S = 30.0
PERIOD_S = 0.02


def holds_within(condition: Callable[[], object], timeout_s: float = DEFAULT_S) -> bool:
    """Whether `condition()` holds (is truthy) before `timeout_s` passes; it is asked once more at the end."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(PERIOD_S)
    return bool(condition())


def wait_until(condition: Callable[[], object], what: str = "the condition", timeout_s: float = DEFAULT_S) -> None:
    """Until `condition()` holds; fails the test naming `what` when `timeout_s` passes first."""
    assert holds_within(condition, timeout_s), f"gave up after {timeout_s:.0f} s waiting for: {what}"


def wait_for_file(path: str | os.PathLike[str], timeout_s: float = DEFAULT_S) -> None:
    """Until `path` exists (a model or a test's helper writes it to say it got somewhere)."""
    appeared = holds_within(lambda: os.path.exists(path), timeout_s)
    assert appeared, f"{os.fspath(path)} never appeared within {timeout_s:.0f} s"


async def woken_until(came: asyncio.Event, count: Callable[[], int], wanted: int, what: str,
                      timeout_s: float = DEFAULT_S) -> None:
    """(On an event loop) until `count()` reaches `wanted`, looked at each time `came` is set (by whatever adds to what
    is counted); fails the test naming `what` ("3 of 5 <what> came") when `timeout_s` passes first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while count() < wanted:
        came.clear()
        try:
            await asyncio.wait_for(came.wait(), max(deadline - loop.time(), 0.0))
        except TimeoutError:
            raise AssertionError(f"{count()} of {wanted} {what} came") from None
