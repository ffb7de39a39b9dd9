"""merge_statistics: the statistics extension's answer when several front-end processes each counted a part."""

from __future__ import annotations

from pytriton.core.peers import merge_statistics
from pytriton.core.statistics import ModelStatistics


def _stats(requests: int, batch: int, when_ms: int) -> ModelStatistics:
    stats = ModelStatistics()
    for _ in range(requests):
        stats.record_success(batch, 100, 10, 1, 50, 2)
        stats.record_execution(batch, 1, 50, 2)
    stats.record_failure(7, "BACKEND")
    stats.last_inference_ms = when_ms
    return stats


def test_counts_durations_and_batches_add_up_per_model_version():
    a = [_stats(3, 1, 1000).to_dict("m", "1"), _stats(1, 1, 5).to_dict("n", "1")]
    b = [_stats(2, 4, 2000).to_dict("m", "1")]
    before = [dict(e) for e in a]
    merged = merge_statistics([a, b])
    assert [(e["name"], e["version"]) for e in merged] == [("m", "1"), ("n", "1")]
    m = merged[0]
    assert m["inference_count"] == 3 + 2 * 4 and m["execution_count"] == 5
    assert m["last_inference"] == 2000
    assert m["inference_stats"]["success"] == {"count": 5, "ns": 500}
    assert m["inference_stats"]["fail"] == {"count": 2, "ns": 14}
    assert [(s["batch_size"], s["compute_infer"]["count"]) for s in m["batch_stats"]] == [(1, 3), (4, 2)]
    assert merged[1] == a[1]  # a model only one process served is its entry
    assert a == before  # the parts are not changed


def test_one_part_is_itself():
    part = [_stats(2, 2, 9).to_dict("m", "3")]
    assert merge_statistics([part]) == part
