"""Rate-limited logging of callable failures (a fake clock drives the interval)."""

from __future__ import annotations

import logging

from pytriton.backends._error_log import CallableErrorLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def failure(n: int) -> ValueError:
    try:
        raise ValueError(f"boom {n}")
    except ValueError as exc:
        return exc


def test_first_in_full_then_one_per_interval(caplog):
    clock = Clock()
    log = CallableErrorLog("model 'm' instance 0", logging.getLogger("test.errors"), full=3, interval_s=60,
                           clock=clock)
    with caplog.at_level(logging.ERROR, "test.errors"):
        for n in range(1, 11):  # 3 in full, then 7 within the interval: held back
            log.report(failure(n))
            clock.now += 1
        assert [r.getMessage() for r in caplog.records] == [
            "model 'm' instance 0: inference callable failed (failure 1): ValueError: boom 1",
            "model 'm' instance 0: inference callable failed (failure 2): ValueError: boom 2",
            ("model 'm' instance 0: inference callable failed (failure 3; further failures are logged at most once "
             "per 60 s): ValueError: boom 3"),
        ]
        assert all(r.exc_info is not None and r.exc_info[1] is not None for r in caplog.records)  # tracebacks
        caplog.clear()
        clock.now += 60
        log.report(failure(11))
        log.report(failure(12))
        assert [r.getMessage() for r in caplog.records] == [
            ("model 'm' instance 0: inference callable failed (failure 11; 7 failure(s) since the last one logged "
             "were not logged): ValueError: boom 11"),
        ]
        caplog.clear()
        clock.now += 61
        log.report(failure(13), traceback=False)
        [record] = caplog.records
        assert "failure 13; 1 failure(s) since the last one logged" in record.getMessage()
        assert record.exc_info is None
    assert log.failures == 13 and log.suppressed == 0
