"""Dataclass results: results.json round trip (also a file from before the dataclasses), medians."""

from __future__ import annotations

import dataclasses
import json

import pytest
from bench_lib.results import (
    BenchResult,
    CaseRun,
    InprocessRow,
    Meta,
    PaCounts,
    RunInfo,
    ServerSamples,
    Settings,
    aggregate,
    from_dict,
    load_results,
    median,
    save_results,
)

from tests.scripts.made_results import case_run, run_info


def bench_result(samples: dict[str, ServerSamples]) -> BenchResult:
    return BenchResult(samples=samples, versions={"ours": "triton 2.73.0"}, problems=[], cases=["grpc-small-none"],
                       case_labels={"grpc-small-none": "gRPC, 16 floats, no shm"}, elapsed_s=60.0,
                       settings=Settings(3, False, "1:8:7", "8", 1500, 6, 50))


def test_median_ignores_missing_values():
    assert median([3.0, None, 1.0, 2.0]) == 2.0
    assert median([None, None]) is None
    assert median([]) is None


def test_run_shares():
    assert run_info(wall_s=4.0, steal_s=1.0).stolen_cores == 0.25
    assert run_info(steal_s=None).stolen_cores is None
    assert run_info(wall_s=4.0).other_cores == 0.25


def test_aggregate_takes_medians_per_case_and_concurrency():
    smp = ServerSamples(startup_s=[1.0, 3.0, 2.0], rss_ready_kib=[10, 30, 20], pss_ready_kib=[1, 2, 3],
                        peak_rss_kib=[5, 5, 9], processes=2)
    for rep, thr in enumerate([300.0, 100.0, 200.0], start=1):
        smp.add("grpc-small-none", 1, case_run(thr, rep, steal_s=rep * 1.0, p50=thr))
    smp.add("grpc-small-none", 8, case_run(900.0, 1))
    agg = aggregate(bench_result({"ours": smp}))["ours"]
    assert (agg.startup_s, agg.rss_ready_kib, agg.peak_rss_kib, agg.n_launches, agg.processes) == (2.0, 20, 5, 3, 2)
    c1 = agg.case("grpc-small-none", 1)
    assert (c1.throughput, c1.throughput_min, c1.throughput_max, c1.p50_us, c1.n) == (200.0, 100.0, 300.0, 200.0, 3)
    assert c1.steal_cores == 0.2  # steal 1, 2, 3 s over 10 s walls
    assert c1.per_repeat == {"1": (300.0, 0.1), "2": (100.0, 0.2), "3": (200.0, 0.3)}
    assert agg.concurrencies("grpc-small-none") == {1, 8}
    assert agg.case("grpc-small-none", 4).n == 0  # not measured: all empty


def test_runs_without_repeat_number_count_in_order():
    smp = ServerSamples()
    smp.add("k", 1, case_run(1.0, None, steal_s=None))
    smp.add("k", 1, case_run(2.0, None, steal_s=None))
    agg = aggregate(bench_result({"ours": smp}))["ours"].case("k", 1)
    assert agg.per_repeat == {"1": (1.0, None), "2": (2.0, None)}
    assert agg.steal_cores is None


def test_recorded_results_load(data):
    result, meta = load_results(data / "results_quick.json")
    assert set(result.samples) == {"ours", "nvidia"}
    run = result.samples["ours"].cases["grpc-small-none"]["1"][0]
    assert isinstance(run, CaseRun) and isinstance(run.run, RunInfo) and isinstance(run.counts, PaCounts)
    assert (run.throughput, run.p50_us, run.counts.client_count, run.repeat) == (1263.12, 751.0, 6825, 1)
    assert result.settings.quick is True and result.settings.repeats == 1
    assert meta.machine.cpus == "2" and meta.pa_version == "2.35.0"
    assert result.inprocess == []  # recorded before the in-process rows existed


def test_in_process_rows_round_trip(data, tmp_path):
    result, meta = load_results(data / "results_quick.json")
    result = dataclasses.replace(result, inprocess=[InprocessRow("async", "1mib", 8, 10, 5.0, 100.0, 200.0)])
    save_results(tmp_path / "results.json", result, aggregate(result), meta)
    again, _ = load_results(tmp_path / "results.json")
    assert again.inprocess == result.inprocess and isinstance(again.inprocess[0], InprocessRow)


def test_results_json_round_trip(data, tmp_path):
    result, meta = load_results(data / "results_quick.json")
    agg = aggregate(result)
    save_results(tmp_path / "results.json", result, agg, meta)
    again, meta2 = load_results(tmp_path / "results.json")
    assert again == result and meta2 == meta
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["aggregate"]["ours"]["cases"]["grpc-small-none@1"]["throughput"] == 1263.12
    assert saved["result"] == json.loads(json.dumps(dataclasses.asdict(result)))


def test_from_dict_tolerates_old_and_unknown_keys():
    old = dataclasses.asdict(run_info())
    del old["steal_s"], old["server_cpu_us_per_request"]
    old["added_later"] = 1
    info = from_dict(RunInfo, old)
    assert info.steal_s is None and info.server_cpu_us_per_request is None and info.wall_s == 10.0
    with pytest.raises(TypeError):
        from_dict(RunInfo, {"wall_s": 1.0})
    assert from_dict(Meta, None) is None
