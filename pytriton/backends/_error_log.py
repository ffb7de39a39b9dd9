"""Rate-limited logging of an inference callable's failures, one log per model instance.

A failing callable usually fails for every request; logging each failure in full would flood the log and cost
the worker time. The first few are logged with their tracebacks; after that at most one per interval, saying how
many were left out since the last one logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

FULL_FAILURES = 5  # logged in full before the rate limit applies
INTERVAL_S = 60.0  # then at most one failure logged per interval


class CallableErrorLog:
    """Logs the failures of one model instance's callable (ERROR, with the traceback when it helps)."""

    def __init__(
        self,
        label: str,
        logger: logging.Logger,
        full: int = FULL_FAILURES,
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.label = label
        self.logger = logger
        self.full = full
        self.interval_s = interval_s
        self.clock = clock
        self.failures = 0
        self.suppressed = 0
        self._last_logged = 0.0

    def report(self, exc: BaseException, traceback: bool = True) -> None:
        """Count one failure and log it unless the rate limit holds it back. `traceback=False` for errors whose
        message says it all (an output of the wrong type, say)."""
        self.failures += 1
        now = self.clock()
        if self.failures > self.full and now - self._last_logged < self.interval_s:
            self.suppressed += 1
            return
        note = ""
        if self.failures == self.full:
            note = f"; further failures are logged at most once per {self.interval_s:g} s"
        elif self.failures > self.full:
            note = f"; {self.suppressed} failure(s) since the last one logged were not logged"
        self.suppressed = 0
        self._last_logged = now
        self.logger.error(
            "%s: inference callable failed (failure %d%s): %s: %s", self.label, self.failures, note,
            type(exc).__name__, exc, exc_info=exc if traceback else None,
        )
