"""The soak's classification of outcomes, error classes, latency histograms."""

from __future__ import annotations

import json
import random

import pytest
from soak_lib.tally import KindTally, LatencyHistogram, Tally, classify, error_class, is_timeout


@pytest.mark.parametrize(("kind", "message", "outcome"), [
    ("grpc-deadline", "InferenceServerException: [StatusCode.DEADLINE_EXCEEDED] Deadline Exceeded", "cancelled"),
    ("grpc-deadline", "InferenceServerException: [StatusCode.CANCELLED] Cancelled", "cancelled"),
    ("grpc-deadline", "InferenceServerException: [StatusCode.UNAVAILABLE] Socket closed", "error"),
    ("grpc-deadline", "WrongResult: wrong result (grpc-deadline): shape [1, 16], 3 of 16 values differ", "error"),
    ("grpc-small", "InferenceServerException: [StatusCode.DEADLINE_EXCEEDED] Deadline Exceeded", "error"),
    ("http-1mib", "TimeoutError: timed out", "error"),
    ("aio-grpc", "CancelledError: ", "error"),  # an ordinary request that got cancelled is not deliberate
])
def test_classify(kind, message, outcome):
    assert classify(kind, message) == outcome


def test_error_class_groups_messages_that_differ_in_numbers():
    a = error_class("WrongResult: wrong result (http-1mib): shape [1, 262144], 17 of 262144 values differ from 2x")
    b = error_class("WrongResult: wrong result (http-1mib): shape [1, 262144], 9 of 262144 values differ from 2x\nmore")
    assert a == b == "WrongResult: wrong result (http-Nmib): shape [N, N], N of N values differ from Nx"
    assert error_class("x at 0x7f3a9c startup 1.5 s") == "x at N startup N s"
    assert len(error_class("e" * 1000)) == 160
    assert error_class("") == ""


def test_timeouts_are_recognised():
    assert is_timeout("[StatusCode.DEADLINE_EXCEEDED] Deadline Exceeded") and is_timeout("TimeoutError: timed out")
    assert not is_timeout("[StatusCode.UNAVAILABLE] Socket closed")


def test_histogram_percentiles_within_a_bucket():
    h = LatencyHistogram()
    values = [i / 1000 for i in range(1, 1001)]  # 1 ms .. 1 s
    random.Random(1).shuffle(values)
    for v in values:
        h.record(v)
    assert h.count == 1000 and h.max_s == 1.0
    assert h.percentile(50) == pytest.approx(0.5, rel=0.02)
    assert h.percentile(99) == pytest.approx(0.99, rel=0.02)
    assert h.percentile(100) == 1.0  # never above the largest seen
    assert len(h.buckets) < 400  # bounded: 2 % buckets, not one per value
    assert LatencyHistogram().percentile(50) is None


def test_histogram_merge_and_round_trip():
    a, b = LatencyHistogram(), LatencyHistogram()
    for v in (0.001, 0.002, 0.003):
        a.record(v)
    b.record(0.5)
    a.merge(b)
    assert a.count == 4 and a.max_s == 0.5 and a.percentile(100) == 0.5
    again = LatencyHistogram.from_dict(json.loads(json.dumps(a.to_dict())))
    assert (again.buckets, again.count, again.max_s) == (a.buckets, a.count, a.max_s)


def test_kind_tally_counts_each_outcome():
    t = KindTally()
    t.record_ok(0.01)
    assert t.record_failure("grpc-deadline", "[StatusCode.DEADLINE_EXCEEDED] Deadline Exceeded") == "cancelled"
    assert t.record_failure("grpc-deadline", "[StatusCode.UNAVAILABLE] Socket closed 12") == "error"
    assert t.record_failure("grpc-deadline", "[StatusCode.UNAVAILABLE] Socket closed 13") == "error"
    assert (t.ok, t.cancelled, t.error_count, t.total) == (1, 1, 2, 4)
    (cls, err), = t.errors.items()
    assert cls == "[StatusCode.UNAVAILABLE] Socket closed N" and err.count == 2
    assert err.example == "[StatusCode.UNAVAILABLE] Socket closed 12"  # the first one seen


def test_tally_merges_processes_and_survives_json():
    one, two = Tally(), Tally()
    one.kind("grpc-small").record_ok(0.002)
    one.kind("http-small").record_failure("http-small", "TimeoutError: timed out")
    two.kind("grpc-small").record_ok(0.004)
    two.kind("grpc-small").record_failure("grpc-small", "TimeoutError: timed out")
    two.kind("http-close").cancelled += 3
    total = Tally.from_dict(json.loads(json.dumps(one.to_dict())))
    total.merge(Tally.from_dict(json.loads(json.dumps(two.to_dict()))))
    assert total.totals() == (2, 3, 2)
    assert total.kinds["grpc-small"].latency.count == 2
    assert {c: e.count for c, e in total.errors_by_class().items()} == {"TimeoutError: timed out": 2}
