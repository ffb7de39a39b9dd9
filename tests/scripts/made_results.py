"""Benchmark results made up for the tests of the report code: a run's figures and a case's run
(tests/scripts/test_results.py, test_tls_bench.py)."""

from __future__ import annotations

from bench_lib.results import CaseRun, PaCounts, RunInfo


def run_info(wall_s: float = 10.0, steal_s: float | None = 1.0, cpu_us: float | None = 500.0) -> RunInfo:
    return RunInfo(wall_s=wall_s, server_cpu_s=5.0, pa_cpu_s=2.0, total_cpu_s=8.0, other_cpu_s=1.0, load_start=1.0,
                   load_end=1.5, requests=1000, peak_rss_kib=100, peak_pss_kib=80, rc=0, unstable=False,
                   steal_s=steal_s, server_cpu_us_per_request=cpu_us)


def case_run(throughput: float, repeat: int | None, steal_s: float | None = 1.0, p50: float = 1000.0) -> CaseRun:
    return CaseRun(throughput=throughput, p50_us=p50, p90_us=2 * p50, p99_us=3 * p50, counts=PaCounts(1, 1, 1),
                   attempt=1, run=run_info(steal_s=steal_s), repeat=repeat)
