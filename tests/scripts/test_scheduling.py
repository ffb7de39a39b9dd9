"""scripts/bench --suite scheduling: options, the models' logic, command lines, targets and the report (no server,
no perf_analyzer, no timing asserts: the figures below are made up)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from bench_lib import bench, sched_models, sched_report
from bench_lib.scheduling import MODELS_FILE, SEQ_FLAGS, CmdServer, Target, nvidia_spin, ours_cli
from bench_lib.servers import ServerSpec


def _result(**over) -> dict:
    def s(tp: float, p50: float = 1000.0) -> list[dict[str, float]]:
        return [{"throughput": tp, "p50_us": p50}]

    result = {
        "samples": {
            "batching/ours/small/c8": s(3000), "batching/nvidia/small/c8": s(1000),
            "batching/ours/small/c16": s(2000), "batching/nvidia/small/c16": s(1000),
            "batching/ours/1mib-shm/c8": s(1000), "batching/nvidia/1mib-shm/c8": s(100),
            "batching/ours/1mib-shm/c16": s(400), "batching/nvidia/1mib-shm/c16": s(100),
            "cpu/ours/i1/c4": s(400), "cpu/ours/i2/c4": s(700), "cpu/nvidia/i2/c4": s(300),
            "cpu/nvidia/i1/c4": s(380),
            "sequence/ours/sequence/c8": s(800), "sequence/ours/dynamic/c8": s(1000),
        },
        "cache": [{"hit": {"n": 10, "p50_us": 300.0, "p99_us": 500.0},
                   "miss": {"n": 10, "p50_us": 800.0, "p99_us": 1200.0}, "server": {}, "problems": []}],
        "problems": [], "elapsed_s": 12.0, "load_start": 1.0, "load_end": 2.0, "other_cores": 0.5,
        "machine": {"cpu": "Test CPU", "cpus": "2"}, "repeats": 1, "rows": ["batching", "cpu", "sequence", "cache"],
        "interval_ms": 1000,
    }
    result.update(over)
    return result


def test_options():
    args = bench.parse_args(["--suite", "scheduling"])
    assert args.repeats == 1 and args.sched_rows == ["batching", "cpu", "sequence", "cache"]
    assert args.doc.name == "benchmarks-scheduling.md"
    args = bench.parse_args(["--suite", "scheduling", "--sched-rows", "cache", "--repeats", "2"])
    assert (args.repeats, args.sched_rows) == (2, ["cache"])
    assert bench.parse_args([]).suite == "main"
    with pytest.raises(SystemExit):
        bench.parse_args(["--suite", "scheduling", "--sched-rows", "cache,nope"])


def test_targets_met_and_missed():
    by = {(t.row, t.what): t for t in sched_report.targets(_result())}
    assert by[("dynamic batching, 16 floats", "ours / NVIDIA throughput at c=8")].met is True  # 3.0 >= 3
    assert by[("dynamic batching, 16 floats", "ours / NVIDIA throughput at c=16")].met is False  # 2.0
    assert by[("dynamic batching, 1 MiB system shm", "ours / NVIDIA throughput at c=8")].met is True  # 10
    assert by[("dynamic batching, 1 MiB system shm", "ours / NVIDIA throughput at c=16")].met is False  # 4
    assert by[("CPU-bound Python, 2 instances", "ours 2 / ours 1 instance throughput")].value == pytest.approx(1.75)
    assert by[("CPU-bound Python, 2 instances", "ours / NVIDIA throughput (2 instances each)")].met is True
    assert by[("sequence batching, c=8", "sequence / dynamic batcher throughput")].met is True  # 0.8
    cache = by[("response cache", "hit p50 / miss p50")]
    assert cache.value == pytest.approx(0.375) and cache.met is True


def test_target_without_a_figure_is_not_measured():
    result = _result(rows=["cpu"])
    del result["samples"]["cpu/nvidia/i2/c4"]
    targets = sched_report.targets(result)
    assert len(targets) == 2 and targets[1].value is None and targets[1].met is None
    assert "NOT MEASURED" in targets[1].line()
    assert "MISSED" in Target("r", "x", 0.9, 1.0).line() and "MET" in Target("r", "x", 0.4, 0.5, False).line()


def test_summary_and_markdown_state_every_target():
    result = _result(problems=["s1-nvidia-spin1: perf_analyzer exited 99"])
    text = sched_report.summary(result)
    assert text.count("(target ") == 8 and "MISSED" in text and "exited 99" in text
    md = sched_report.markdown(result, "2026-01-01 00:00 UTC", "abc123")
    assert md.count("| **no** |") == 2 and "| response cache | hit p50 / miss p50 | 0.38 | <= 0.5 | yes |" in md
    assert "cache hit" in md and "Test CPU" in md and "## Problems seen" in md


def test_from_results_writes_the_report(tmp_path):
    res = tmp_path / "results.json"
    res.write_text(json.dumps(_result()))
    doc = tmp_path / "sched.md"
    assert bench.main(["--suite", "scheduling", "--from-results", str(res), "--doc", str(doc)]) == 0
    assert doc.read_text().startswith("# Benchmarks: scheduling")


def test_models_logic():
    x = np.ones((2, 16), np.float32)
    assert np.array_equal(sched_models.spin_batch(x)["OUTPUT"], x)
    assert np.array_equal(sched_models.double_batch(x)["OUTPUT"], 2 * x)
    first = sched_models.accumulate_batch(x)["OUTPUT"]  # no controls: one running sum (id 0), row by row
    assert np.array_equal(first[1] - first[0], x[1])
    assert np.array_equal(sched_models.accumulate_batch(x)["OUTPUT"][0] - first[1], x[0])
    one = np.ones((2, 1), np.int32)
    corrid = np.array([[7], [8]], np.uint64)
    sched_models.accumulate_batch(x, START=one, READY=one, CORRID=corrid)
    out = sched_models.accumulate_batch(x, START=0 * one, READY=np.array([[1], [0]], np.int32), CORRID=corrid)
    assert np.array_equal(out["OUTPUT"][0], 2 * x[0]) and not out["OUTPUT"][1].any()  # a not-ready slot: zeros


class _FakeServer:
    http_port, grpc_port, metrics_port = 1, 2, 3
    spec = ServerSpec("ours", pathlib.Path("/py"), {})


def test_command_lines():
    argv = ours_cli("accumulate", "acc", *SEQ_FLAGS)(_FakeServer())  # type: ignore[arg-type]
    assert argv[:5] == ["/py", "-m", "pytriton.cli", "serve", f"{MODELS_FILE}:accumulate"]
    assert argv[argv.index("--grpc-port") + 1] == "2" and argv[-len(SEQ_FLAGS):] == list(SEQ_FLAGS)
    argv = nvidia_spin(2)(_FakeServer())  # type: ignore[arg-type]
    assert argv[1].endswith("serve_spin.py") and argv[-2:] == ["--instances", "2"]


def test_cmd_server_log_check(tmp_path):
    spec = ServerSpec("nvidia", tmp_path / "nv" / "bin" / "python", {})
    server = CmdServer(spec, nvidia_spin(1), ["spin"], tmp_path / "s.log", tmp_path)
    (tmp_path / "s.log").write_text(f"BENCH pytriton package: {tmp_path / 'nv' / 'lib'}\nall good\n")
    assert server.scan_log() == []
    (tmp_path / "s.log").write_text(f"BENCH pytriton package: {tmp_path / 'elsewhere'}\nTraceback\n")
    problems = server.scan_log()
    assert len(problems) == 2 and "expected under" in problems[0]
    server.stop()  # never started: a no-op
