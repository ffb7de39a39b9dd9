"""A harness with planted faults, for the runner's own test (`test_fuzz_short.py`): an input starting with "BUG"
raises KeyError (an escaped error), one starting with "BAD" fails the harness's own check."""

from __future__ import annotations

from tests.fuzz.harness import Finding, Harness


class SelfTestHarness(Harness):
    name = "_selftest"
    max_len = 64

    def one_input(self, data: bytes) -> None:
        if data.startswith(b"BUG"):
            raise KeyError("planted")
        if data.startswith(b"BAD"):
            raise Finding("planted check")
