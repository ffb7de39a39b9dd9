"""Per-model inference statistics in Triton's schema (what ModelStatistics and /stats report)."""

from __future__ import annotations

import time
from typing import Any

from pytriton.core.latency_metrics import FirstResponseHistogram, LatencySummaries

_DURATIONS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss")
FAILURE_REASONS = ("BACKEND", "CANCELED", "OTHER", "REJECTED")  # Triton's (nv_inference_request_failure's `reason`)


class ModelStatistics:
    """Counters of one model version; all durations in nanoseconds."""

    def __init__(self) -> None:
        self.durations: dict[str, list[int]] = {name: [0, 0] for name in _DURATIONS}
        self.inference_count = 0
        self.execution_count = 0
        self.last_inference_ms = 0
        self.batch: dict[int, dict[str, list[int]]] = {}
        self.failures = dict.fromkeys(FAILURE_REASONS, 0)  # the failed requests by reason
        self.summaries: LatencySummaries | None = None  # with `--metrics-config summary_latencies=true`
        # a decoupled model's, with `--metrics-config histogram_latencies=true`
        self.first_response: FirstResponseHistogram | None = None

    def record_success(
        self, batch_size: int, total_ns: int, queue_ns: int, input_ns: int, infer_ns: int, output_ns: int
    ) -> None:
        """One request answered successfully."""
        d = self.durations  # (written out: this runs once per request)
        entry = d["success"]
        entry[0] += 1
        entry[1] += total_ns
        entry = d["queue"]
        entry[0] += 1
        entry[1] += queue_ns
        entry = d["compute_input"]
        entry[0] += 1
        entry[1] += input_ns
        entry = d["compute_infer"]
        entry[0] += 1
        entry[1] += infer_ns
        entry = d["compute_output"]
        entry[0] += 1
        entry[1] += output_ns
        self.inference_count += batch_size
        if self.summaries is not None:
            self.summaries.observe(total_ns, queue_ns, input_ns, infer_ns, output_ns)
        self.last_inference_ms = int(time.time() * 1000)

    def record_execution(self, batch_size: int, input_ns: int, infer_ns: int, output_ns: int) -> None:
        """One execution of the model on a batch of `batch_size`."""
        self.execution_count += 1
        stats = self.batch.get(batch_size)
        if stats is None:
            stats = self.batch[batch_size] = {"compute_input": [0, 0], "compute_infer": [0, 0], "compute_output": [0, 0]}
        for name, ns in (("compute_input", input_ns), ("compute_infer", infer_ns), ("compute_output", output_ns)):
            stats[name][0] += 1
            stats[name][1] += ns

    def record_cache_hit(self, total_ns: int, lookup_ns: int) -> None:
        """One request answered from the response cache: a success (its queue time is none, it was never queued)
        that computed nothing, so neither the inference count nor the compute durations grow (Triton's)."""
        d = self.durations
        for name, ns in (("success", total_ns), ("queue", 0), ("cache_hit", lookup_ns)):
            d[name][0] += 1
            d[name][1] += ns
        if self.summaries is not None:  # (the request and queue summaries include cached requests, as Triton says)
            self.summaries.observe_one("success", total_ns)
            self.summaries.observe_one("queue", 0)
            self.summaries.observe_one("cache_hit", lookup_ns)
        self.last_inference_ms = int(time.time() * 1000)

    def record_cache_miss(self, miss_ns: int, answered: bool = True) -> None:
        """A request the response cache did not hold: the lookup and the insertion (`miss_ns`) add to its request
        duration (already counted as a success, where it was `answered`), as Triton counts them."""
        if answered:
            self.durations["success"][1] += miss_ns
        entry = self.durations["cache_miss"]
        entry[0] += 1
        entry[1] += miss_ns
        if self.summaries is not None:
            self.summaries.observe_one("cache_miss", miss_ns)

    def record_failure(self, total_ns: int, reason: str = "OTHER") -> None:
        """One request failed (`reason`: one of FAILURE_REASONS)."""
        self.failures[reason] = self.failures.get(reason, 0) + 1
        entry = self.durations["fail"]
        entry[0] += 1
        entry[1] += total_ns
        self.last_inference_ms = int(time.time() * 1000)

    def to_dict(self, name: str, version: str) -> dict[str, Any]:
        """The model's entry of Triton's `model_stats` (proto field names; numbers as ints)."""
        return {
            "name": name,
            "version": version,
            "last_inference": self.last_inference_ms,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {k: {"count": c, "ns": ns} for k, (c, ns) in self.durations.items()},
            "response_stats": {},
            "batch_stats": [
                {"batch_size": size, **{k: {"count": c, "ns": ns} for k, (c, ns) in stats.items()}}
                for size, stats in sorted(self.batch.items())
            ],
            "memory_usage": [],
        }
