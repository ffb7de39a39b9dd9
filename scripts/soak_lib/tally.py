"""What the soak's clients saw: outcomes per kind of request, errors by class, latency histograms.

A request ends `ok` (answered, and the answer is right), `cancelled` (a deliberately cancelling kind whose
cancellation took effect: that is expected), or `error` (anything else, counted by class). Everything here
is plain data that travels from the client processes to the soak as dicts (`to_dict` / `from_dict`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

# Kinds whose requests are cancelled on purpose (a deadline, a cancelled task, a closed connection).
CANCELLING_KINDS = frozenset({"grpc-deadline", "aio-cancel", "http-close"})
_CANCELLED = re.compile(r"deadline.?exceeded|cancelled|canceled", re.IGNORECASE)
_TIMEOUT = re.compile(r"deadline.?exceeded|timed? ?out", re.IGNORECASE)
_VOLATILE = re.compile(r"0x[0-9a-f]+|\d+(\.\d+)?", re.IGNORECASE)

_BUCKET_BASE = 1.02  # histogram buckets 2 % wide


def error_class(message: str) -> str:
    """An error message with the parts that change between occurrences (numbers, ids) made uniform, so that
    errors group by what went wrong: 'Deadline Exceeded', 'wrong result: ...', 'connection reset ...'."""
    first = (message.strip().splitlines() or [""])[0]
    return _VOLATILE.sub("N", first)[:160]


def classify(kind: str, message: str) -> str:
    """`cancelled` for the expected end of a cancelling kind, otherwise `error`."""
    if kind in CANCELLING_KINDS and _CANCELLED.search(message):
        return "cancelled"
    return "error"


def is_timeout(message: str) -> bool:
    return bool(_TIMEOUT.search(message))


class LatencyHistogram:
    """Latencies in 2 %-wide logarithmic buckets: bounded memory whatever the request count."""

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.max_s = 0.0

    def record(self, seconds: float) -> None:
        us = max(seconds * 1e6, 1.0)
        b = int(math.log(us, _BUCKET_BASE))
        self.buckets[b] = self.buckets.get(b, 0) + 1
        self.count += 1
        self.max_s = max(self.max_s, seconds)

    def merge(self, other: LatencyHistogram) -> None:
        for b, n in other.buckets.items():
            self.buckets[b] = self.buckets.get(b, 0) + n
        self.count += other.count
        self.max_s = max(self.max_s, other.max_s)

    def percentile(self, q: float) -> float | None:
        """The q-th percentile (0-100) in seconds, to within a bucket (2 %); None when empty."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q / 100 * self.count))
        if rank >= self.count:
            return self.max_s
        seen = 0
        for b in sorted(self.buckets):
            seen += self.buckets[b]
            if seen >= rank:
                return min(_BUCKET_BASE ** (b + 0.5) / 1e6, self.max_s)
        return self.max_s

    def to_dict(self) -> dict[str, Any]:
        return {"buckets": {str(b): n for b, n in self.buckets.items()}, "count": self.count, "max_s": self.max_s}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LatencyHistogram:
        h = cls()
        h.buckets = {int(b): int(n) for b, n in data["buckets"].items()}
        h.count, h.max_s = int(data["count"]), float(data["max_s"])
        return h


@dataclasses.dataclass
class ErrorClass:
    count: int = 0
    example: str = ""  # the first full message of this class


class KindTally:
    """Outcomes of one kind of request: ok (with latencies), cancelled, errors by class."""

    def __init__(self) -> None:
        self.ok = 0
        self.cancelled = 0
        self.errors: dict[str, ErrorClass] = {}
        self.latency = LatencyHistogram()  # of the ok requests

    @property
    def error_count(self) -> int:
        return sum(e.count for e in self.errors.values())

    @property
    def total(self) -> int:
        return self.ok + self.cancelled + self.error_count

    def record_ok(self, seconds: float) -> None:
        self.ok += 1
        self.latency.record(seconds)

    def record_failure(self, kind: str, message: str) -> str:
        """Count a request that raised; returns its outcome (`cancelled` or `error`)."""
        outcome = classify(kind, message)
        if outcome == "cancelled":
            self.cancelled += 1
        else:
            err = self.errors.setdefault(error_class(message), ErrorClass(example=message.strip()[:500]))
            err.count += 1
        return outcome

    def merge(self, other: KindTally) -> None:
        self.ok += other.ok
        self.cancelled += other.cancelled
        for cls, e in other.errors.items():
            mine = self.errors.setdefault(cls, ErrorClass(example=e.example))
            mine.count += e.count
        self.latency.merge(other.latency)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "cancelled": self.cancelled,
                "errors": {c: dataclasses.asdict(e) for c, e in self.errors.items()},
                "latency": self.latency.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KindTally:
        t = cls()
        t.ok, t.cancelled = int(data["ok"]), int(data["cancelled"])
        t.errors = {c: ErrorClass(**e) for c, e in data["errors"].items()}
        t.latency = LatencyHistogram.from_dict(data["latency"])
        return t


class Tally:
    """KindTally per kind of request."""

    def __init__(self) -> None:
        self.kinds: dict[str, KindTally] = {}

    def kind(self, name: str) -> KindTally:
        return self.kinds.setdefault(name, KindTally())

    def merge(self, other: Tally) -> None:
        for name, t in other.kinds.items():
            self.kind(name).merge(t)

    def totals(self) -> tuple[int, int, int]:
        """(ok, cancelled, errors) over all kinds."""
        return (sum(t.ok for t in self.kinds.values()), sum(t.cancelled for t in self.kinds.values()),
                sum(t.error_count for t in self.kinds.values()))

    def errors_by_class(self) -> dict[str, ErrorClass]:
        """Errors of every kind together, by class, the most frequent first."""
        merged: dict[str, ErrorClass] = {}
        for t in self.kinds.values():
            for cls, e in t.errors.items():
                mine = merged.setdefault(cls, ErrorClass(example=e.example))
                mine.count += e.count
        return dict(sorted(merged.items(), key=lambda kv: -kv[1].count))

    def to_dict(self) -> dict[str, Any]:
        return {name: t.to_dict() for name, t in sorted(self.kinds.items())}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Tally:
        t = cls()
        t.kinds = {name: KindTally.from_dict(d) for name, d in data.items()}
        return t
