"""`scripts/bench --vs-triton` and `--many-models` in their quick mode (scripts/bench_lib/vs_triton.py,
many_models.py): the report docs/benchmarks-triton.md gets each case (or model count) with both servers' figures and
the ratios, each suite in its own section. Ours alone always; beside the real tritonserver 2.51 where it is installed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support.paths import REPO
from tests._support.real_tritonserver import NOT_INSTALLED, REAL

BENCH = REPO / "scripts" / "bench_lib" / "bench.py"
PERF_ANALYZER = REPO / ".tools" / "bin" / "perf_analyzer"
needs_perf_analyzer = pytest.mark.skipif(not PERF_ANALYZER.exists(),
                                         reason="perf_analyzer is not installed (scripts/install-perf-analyzer)")


def bench(tmp_path: Path, name: str, *args: str) -> tuple[dict, str]:
    """One suite run into tmp_path (its own output folder, the report tmp_path/report.md); (results.json, stdout).
    Exit status 0: the bench saw no problem, and it checks after each stop that the server left no process, /dev/shm
    segment (Triton's stubs' regions included) or TMPDIR file behind."""
    out = tmp_path / name
    run = subprocess.run([sys.executable, str(BENCH), *args, "--out-dir", str(out),
                          "--triton-doc", str(tmp_path / "report.md")],
                         capture_output=True, text=True, timeout=600, cwd=REPO, check=False)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    return json.loads((out / "results.json").read_text()), run.stdout


def table_row(doc: str, first: str) -> list[str]:
    """The cells of the first markdown table row whose first cell is `first`."""
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{doc}")


def number(cell: str) -> float:
    assert re.fullmatch(r"[\d,]+(\.\d+)?", cell), cell
    return float(cell.replace(",", ""))


@pytest.mark.slow
@needs_perf_analyzer
def test_both_suites_report_ours_alone_with_the_triton_columns_left_empty(tmp_path):
    result, out = bench(tmp_path, "vs", "--vs-triton", "--quick", "--servers", "ours")
    assert sorted(result["samples"]) == ["ours/grpc-16-c1", "ours/http-16-c8"]
    assert "ours / Triton throughput = no result (target >= 1.5): NOT MEASURED" in out
    doc = (tmp_path / "report.md").read_text()
    row = table_row(doc, "gRPC, 16 floats, c=1")  # case | Triton | ours | ratio | target | p50s | p50 ratio
    assert row[1] == "–" and number(row[2]) > 0 and row[3] == "–" and row[4] == "≥ 1.5" and number(row[6]) > 0
    cpu = next(line for line in doc.splitlines() if line.startswith("| HTTP, 16 floats, c=8 | pytriton (ours) |"))
    assert re.search(r"front-end \d+ \+ workers \d+ \| \d+ \| \d+ \| [\d,]+ \|", cpu), cpu
    assert "_Not run yet: `scripts/bench --many-models`._" in doc

    result, out = bench(tmp_path, "many", "--many-models", "1,2", "--quick", "--servers", "ours")
    # pytriton serve, the warm template the workers are forked from, and one worker per model
    assert [s["processes"] for s in (result["samples"]["ours/1"][0], result["samples"]["ours/2"][0])] == [3, 4]
    doc = (tmp_path / "report.md").read_text()
    assert "## Throughput and latency on one model repository (issue 37)" in doc  # (kept by the other suite)
    row = table_row(doc, "2")  # models | Triton ready, PSS, processes | ours ready, PSS, processes | ratios
    assert row[1:4] == ["–"] * 3 and number(row[4]) > 0 and number(row[5]) > 0 and row[6] == "4"
    assert row[7:] == ["–", "–"]


@pytest.mark.slow
@needs_perf_analyzer
@pytest.mark.skipif(REAL.missing() is not None, reason=f"{NOT_INSTALLED}: {REAL.missing()}")
def test_both_suites_give_ratios_beside_the_real_tritonserver(tmp_path):
    nvidia = ["--nvidia-python", str(REAL.venv_bin / "python")]
    result, out = bench(tmp_path, "vs", "--vs-triton", "--quick", *nvidia, "--vs-cases", "grpc-16-c1")
    assert sorted(result["samples"]) == ["ours/grpc-16-c1", "triton/grpc-16-c1"]
    assert re.search(r"ours / Triton p50 latency = \d+\.\d\d \(target <= 0.7\): (MET|MISSED)", out), out
    doc = (tmp_path / "report.md").read_text()
    row = table_row(doc, "gRPC, 16 floats, c=1")
    assert number(row[3]) == pytest.approx(number(row[2]) / number(row[1]), rel=0.02)
    cpu = next(line for line in doc.splitlines() if line.startswith("| gRPC, 16 floats, c=1 | tritonserver 2.51 |"))
    assert re.search(r"tritonserver \d+ \+ Python stubs \d+ \|", cpu), cpu

    result, _ = bench(tmp_path, "many", "--many-models", "2", "--quick", *nvidia)
    assert result["samples"]["triton/2"][0]["processes"] == 3 and result["samples"]["triton/2"][0]["answered"] == 2
    row = table_row((tmp_path / "report.md").read_text(), "2")
    assert number(row[7]) == pytest.approx(number(row[4]) / number(row[1]), rel=0.02)


def test_each_suite_rewrites_its_own_section_of_the_report(tmp_path):
    from bench_lib import triton_report

    doc = tmp_path / "benchmarks-triton.md"
    triton_report.write_section(doc, "many-models", "## Many\n\nfirst")
    assert "_Not run yet: `scripts/bench --vs-triton`._" in doc.read_text()
    triton_report.write_section(doc, "vs-triton", "## Versus\n\nsecond")
    triton_report.write_section(doc, "many-models", "## Many\n\nthird")
    assert "_Not run yet: `scripts/bench --streaming`._" in doc.read_text()
    triton_report.write_section(doc, "streaming", "## Streaming\n\nfourth")
    text = doc.read_text()
    assert "second" in text and "third" in text and "fourth" in text and "first" not in text
    assert "Not run yet" not in text
    assert text.index("## Versus") < text.index("## Many") < text.index("## Streaming")


def test_the_options_refuse_what_the_suites_cannot_run(capsys):
    from bench_lib import bench

    for argv, words in ((["--many-models", "8,x"], "'x' is not a number of models"),
                        (["--many-models", "0"], "'0' is not a number of models"),
                        (["--vs-triton", "--vs-cases", "grpc-16-c2"], "unknown --vs-cases: ['grpc-16-c2']"),
                        (["--vs-triton", "--servers", "nvidia"], "unknown server(s): ['nvidia']"),
                        (["--vs-triton", "--many-models", "1"], "separate runs")):
        with pytest.raises(SystemExit):
            bench.parse_args(argv)
        assert words in capsys.readouterr().err
    args = bench.parse_args(["--many-models", "64,1,8,1", "--quick"])
    assert (args.many_models, args.servers, args.repeats) == ([64, 1, 8], ["ours", "triton"], 1)
    args = bench.parse_args(["--vs-triton", "--quick"])
    assert (args.interval, args.repeats) == (500, 1)
    assert bench.parse_args(["--vs-triton"]).interval == 1500


def test_process_roles_follow_the_command_lines():
    from bench_lib.triton_launch import role

    assert role("ours", "/v/bin/python -m pytriton.cli serve --model-repository /r") == "front-end"
    assert role("ours", "/v/bin/python -m pytriton.server {}") == "front-end"
    assert role("ours", '/v/bin/python -m pytriton.backends.worker {"identity": "m"}') == "workers"
    assert role("ours", "/v/bin/python -m pytriton.backends.template 5 1234") == "workers"  # (and its forks)
    assert role("triton", "/s/tritonserver --model-repository /r") == "tritonserver"
    assert role("triton", "/b/python/triton_python_backend_stub /r/m/1/model.py triton_python_backend_shm_region_1 "
                          "1048576") == "Python stubs"


def test_the_roles_cpu_is_scaled_to_the_kept_attempt_of_a_retried_run():
    from bench_lib.triton_report import role_split

    # both attempts read: 300 + 100 µs per kept request; the kept attempt's server CPU: 0.2 cores x 1 s / 1000 requests
    retried = {"cpu_us": {"front-end": 300.0, "workers": 100.0}, "requests": 1000, "server_cores": 0.2, "wall_s": 1.0}
    assert role_split(retried) == {"front-end": pytest.approx(150.0), "workers": pytest.approx(50.0)}
    once = {"cpu_us": {"front-end": 150.0, "workers": 50.0}, "requests": 1000, "server_cores": 0.2, "wall_s": 1.0}
    assert role_split(once) == {"front-end": pytest.approx(150.0), "workers": pytest.approx(50.0)}


@pytest.mark.slow
@pytest.mark.skipif(REAL.missing() is not None, reason=f"{NOT_INSTALLED}: {REAL.missing()}")
def test_a_tritonserver_dying_while_it_loads_leaves_no_stub_and_no_shm_region(tmp_path):
    """tritonserver 2.51 can abort while loading many Python models on a busy machine (seen once in 64: a
    boost::interprocess::lock_exception); the bench's stop must still find its stubs and their regions."""
    import os
    import signal
    import threading

    from bench_lib import procfs
    from bench_lib.real_triton import stub_regions
    from bench_lib.repo_double import write_repository
    from bench_lib.triton_launch import TritonServer, base_environment

    repo = write_repository(tmp_path / "repo", ["quick", "slow"], "dynamic", floats={"quick": 16, "slow": 16})
    gate = tmp_path / "slow-initializing"
    (repo / "slow" / "1" / "model.py").write_text(
        "import pathlib, time\n\nclass TritonPythonModel:\n    def initialize(self, args):\n"
        f"        pathlib.Path({str(gate)!r}).write_text('in')\n        time.sleep(120)\n")
    server = TritonServer(REAL, REAL.stage_backends(tmp_path / "backends"), repo, ["quick", "slow"],
                          tmp_path / "server.log", tmp_path, base_environment())
    starting = threading.Thread(target=server.start, args=(180,))
    starting.start()
    try:
        for _ in range(1200):  # (the slow model's initialize is running: both stubs and regions exist; 120 s at most)
            if gate.exists():
                break
            starting.join(0.1)
        assert gate.exists(), (tmp_path / "server.log").read_text()[-2000:]
        assert server.proc is not None
        stubs = [pid for pid in procfs.descendants(server.proc.pid) if "triton_python_backend_stub" in procfs.cmdline(pid)]
        regions = [r for pid in stubs for r in stub_regions(procfs.cmdline(pid))]
        assert len(regions) == 2
        os.kill(server.proc.pid, signal.SIGKILL)
    finally:
        starting.join()
        server.stop()
    assert [r for r in regions if os.path.exists(f"/dev/shm/{r}")] == []
    assert [pid for pid in stubs if procfs.start_time(pid) is not None and "triton_python_backend_stub" in
            procfs.cmdline(pid)] == []
    assert "server script exited with status -9" in " ".join(server.problems)


def test_each_target_is_turned_into_the_server_cpu_per_request_it_allows():
    from bench_lib.triton_report import budget_rows

    def sample(throughput: float, roles: dict[str, float], pa: float) -> dict:
        requests = 10_000
        return {"throughput": throughput, "cpu_us": roles, "pa_cpu_us": pa, "requests": requests, "wall_s": 1.0,
                "server_cores": sum(roles.values()) * requests / 1e6}

    # Triton: 10,000/s; target 1.5x = 15,000/s; on 2 CPUs with perf_analyzer at 50 µs: 2e6/15,000 - 50 = 83 µs left.
    # Ours: 100 + 50 µs + perf_analyzer 50 = 200 µs, ceiling 10,000/s, measured 8,000/s: share 0.8, so at the
    # target 0.8 x 2e6/15,000 - 50 = 56.7 µs; ours uses 150: 2.6 times too many.
    result = {"machine": {"cpus": "2"}, "cases": [{"key": "k", "label": "case", "target": 1.5}],
              "samples": {"triton/k": [sample(10_000.0, {"tritonserver": 80.0, "Python stubs": 40.0}, 45.0)],
                          "ours/k": [sample(8_000.0, {"front-end": 100.0, "workers": 50.0}, 50.0)]}}
    assert budget_rows(result) == [["case", "15,000", "83", "0.80", "57", "150", "120", "2.6"]]


# ------------------------------------------------------------- ours on N front-ends, the lent 16-core machine ---
def vs_sample(throughput: float, p50_us: float, roles: dict[str, float], pa: float = 50.0) -> dict:
    requests = 10_000
    return {"throughput": throughput, "p50_us": p50_us, "p99_us": 2 * p50_us, "requests": requests, "wall_s": 1.0,
            "cpu_us": roles, "pa_cpu_us": pa, "server_cores": sum(roles.values()) * requests / 1e6,
            "pa_cores": 0.5, "other_cores": 0.0, "load": 1.0}


def made_vs_result(samples: dict[str, list[dict]], servers: list[str]) -> dict:
    return {"suite": "vs-triton", "samples": samples, "problems": [], "servers": servers, "repeats": 1,
            "cases": [{"key": "grpc-16-c1", "label": "gRPC, 16 floats, c=1", "target": 1.5}],
            "elapsed_s": 60.0, "uptime_start": "0.10 0.10 0.10", "uptime_end": "0.20 0.10 0.10",
            "machine": {"cpus": "16", "cpu": "Xeon", "memory": "126 GiB", "kernel": "6", "python": "3.12.3"},
            "interval_ms": 1000, "delay_us": 100, "date": "2026-12-07 11:00 UTC", "git": "abc1234"}


def test_ours_on_n_front_ends_is_a_server_of_its_own_between_ours_and_triton():
    from bench_lib.triton_launch import label, role, roles
    from bench_lib.vs_triton import server_names

    assert server_names(["ours", "triton"], [4, 8]) == ["ours", "ours-fe4", "ours-fe8", "triton"]
    assert server_names(["ours", "triton"], []) == ["ours", "triton"]  # (the default: unchanged)
    assert server_names(["ours"], [4]) == ["ours", "ours-fe4"]
    assert server_names(["triton"], [4]) == ["triton"]  # (a variant of ours only beside ours)
    assert label("ours-fe4") == "pytriton (ours, 4 front-end processes)" and label("ours") == "pytriton (ours)"
    assert roles("ours-fe4") == ("front-end", "workers")
    assert role("ours-fe4", "/v/bin/python -m pytriton.server {}") == "front-end"
    assert role("ours-fe4", '/v/bin/python -m pytriton.backends.worker {"identity": "m"}') == "workers"


def test_the_front_ends_and_time_limit_options_are_checked(capsys):
    from bench_lib import bench

    for argv, words in ((["--vs-triton", "--ours-frontends", "4,1"], "'1' is not a number of front-end processes"),
                        (["--vs-triton", "--ours-frontends", "x"], "'x' is not a number of front-end processes"),
                        (["--vs-triton", "--ours-frontends", ","], "no number of front-end processes given"),
                        (["--ours-frontends", "4"], "--ours-frontends goes with --vs-triton"),
                        (["--many-models", "1", "--time-limit", "60"], "--time-limit goes with --vs-triton")):
        with pytest.raises(SystemExit):
            bench.parse_args(argv)
        assert words in capsys.readouterr().err
    args = bench.parse_args(["--vs-triton", "--ours-frontends", "8,4,8", "--time-limit", "420"])
    assert (args.ours_frontends, args.time_limit) == ([8, 4], 420.0)
    args = bench.parse_args(["--vs-triton"])
    assert (args.ours_frontends, args.time_limit) == (None, None)


def test_the_report_gives_ours_on_n_front_ends_beside_triton_with_its_own_targets():
    from bench_lib import triton_report

    result = made_vs_result({
        "triton/grpc-16-c1": [vs_sample(2000.0, 500.0, {"tritonserver": 250.0, "Python stubs": 100.0})],
        "ours/grpc-16-c1": [vs_sample(1500.0, 600.0, {"front-end": 300.0, "workers": 150.0})],
        "ours-fe4/grpc-16-c1": [vs_sample(4000.0, 300.0, {"front-end": 320.0, "workers": 160.0})],
    }, ["ours", "ours-fe4", "triton"])
    doc = triton_report.vs_markdown(result)
    assert table_row(doc, "gRPC, 16 floats, c=1")[1:4] == ["2,000.0", "1,500.0", "0.75"]  # (the first table: ours)
    section = doc[doc.index("### Ours on 4 front-end processes"):doc.index("### Targets")]
    assert "--frontend-processes 4" in section and "4 instances in all" in section
    assert table_row(section, "gRPC, 16 floats, c=1")[1:] == ["2,000.0", "4,000.0", "2.00", "≥ 1.5", "0.500",
                                                              "0.300", "0.60"]
    targets = [line for line in doc.splitlines() if line.startswith("| gRPC, 16 floats, c=1 | ours")]
    assert targets == ["| gRPC, 16 floats, c=1 | ours / Triton throughput | 0.75 | ≥ 1.5 | **no** |",
                       "| gRPC, 16 floats, c=1 | ours / Triton p50 latency | 1.20 | ≤ 0.7 | **no** |",
                       "| gRPC, 16 floats, c=1 | ours (4 front-ends) / Triton throughput | 2.00 | ≥ 1.5 | yes |",
                       "| gRPC, 16 floats, c=1 | ours (4 front-ends) / Triton p50 latency | 0.60 | ≤ 0.7 | yes |"]
    cpu = table_row(doc[doc.index("### CPU per request"):], "gRPC, 16 floats, c=1")  # (ours first, its order)
    assert cpu[1:3] == ["pytriton (ours)", "front-end 300 + workers 150"]
    assert "| gRPC, 16 floats, c=1 | pytriton (ours, 4 front-end processes) | front-end 320 + workers 160 | 50 | 530 |" \
        in doc
    out = triton_report.vs_summary(result)
    assert "gRPC, 16 floats, c=1: ours (4 front-ends) / Triton throughput = 2.00 (target >= 1.5): MET" in out
    assert re.search(r"ours \(4 front-ends\) \(--frontend-processes 4, an instance in each\) vs Triton:\n"
                     r"  gRPC, 16 floats, c=1 +2,000\.0 +4,000\.0 +2\.00 ", out), out


def test_the_time_limit_leaves_out_the_launches_that_would_end_past_it(tmp_path, monkeypatch):
    from bench_lib import bench, vs_triton

    args = bench.parse_args(["--vs-triton", "--servers", "ours", "--ours-frontends", "2", "--repeats", "3",
                             "--time-limit", "250", "--out-dir", str(tmp_path)])
    clock = [1000.0]
    monkeypatch.setattr(vs_triton.time, "time", lambda: clock[0])
    suite = vs_triton.VsTriton(args, bench.pa_options(args), None)
    launched: list[tuple[int, str]] = []

    def launch(rnd: int, name: str) -> None:  # each launch takes 100 s of the made clock
        launched.append((rnd, name))
        clock[0] += 100.0
    monkeypatch.setattr(suite, "launch", launch)
    result = suite.run()
    # after 2 launches (200 s, 100 s each), a third would end at 300 s > 250 s
    assert launched == [(0, "ours"), (0, "ours-fe2")]
    assert result["problems"] == ["--time-limit 250 s: 2 of 6 launches run (200 s), the rest left out"]
    assert result["servers"] == ["ours", "ours-fe2"]

    args.time_limit = None  # no limit: every launch, the order alternating from round to round
    launched.clear()
    suite = vs_triton.VsTriton(args, bench.pa_options(args), None)
    monkeypatch.setattr(suite, "launch", launch)
    assert suite.run()["problems"] == []
    assert launched == [(0, "ours"), (0, "ours-fe2"), (1, "ours-fe2"), (1, "ours"), (2, "ours"), (2, "ours-fe2")]


def test_a_copy_without_git_names_the_commit_it_was_given_and_perf_analyzer_from_beside_it(tmp_path, monkeypatch):
    from bench_lib import bench

    monkeypatch.setattr(bench, "REPO", tmp_path)  # (no git repository there)
    monkeypatch.delenv(bench.GIT_ENV, raising=False)
    assert bench.git_describe() == "?"
    monkeypatch.setenv(bench.GIT_ENV, "abc1234 (checkout as prepared)")
    assert bench.git_describe() == "abc1234 (checkout as prepared)"
    carried = tmp_path / ".devbench"  # scripts/device-bench-multife --prepare: bin/ beside the perf_analyzer/ copy
    (carried / "bin").mkdir(parents=True)
    (carried / "perf_analyzer").mkdir()
    (carried / "perf_analyzer" / ".installed").write_text("tritonclient==2.35.0 nvidia-cuda-runtime-cu12==12.1.105\n")
    assert bench.perf_analyzer_version(carried / "bin" / "perf_analyzer") == "2.35.0"
    assert bench.perf_analyzer_version(tmp_path / "elsewhere" / "bin" / "perf_analyzer") == "?"


def test_the_report_file_says_how_to_run_the_suite_on_a_lent_machine(tmp_path):
    from bench_lib import triton_report

    doc = tmp_path / "benchmarks-triton.md"
    triton_report.write_section(doc, "vs-triton", "## Versus\n\nfigures")
    text = doc.read_text()
    assert text.index("On a lent 16-core GPU machine") < text.index("## Versus")
    for call in ('run(command="scripts/device-bench-peer --stage", carry=[".devnv"], timeout_s=300)',
                 'run(command="scripts/device-bench-peer --vs-triton", carry=[".devbench"], timeout_s=600)'):
        assert call in text
    assert text == (REPO / "docs" / "benchmarks-triton.md").read_text().split("<!-- vs-triton: start -->")[0] + \
        text[text.index("<!-- vs-triton: start -->"):]  # (the file in the checkout has the same preamble)


def test_the_stage_check_names_what_keeps_tritonserver_from_serving(tmp_path):
    from bench_lib.triton_check import check

    problems = check(tmp_path / "no-venv" / "bin" / "python", tmp_path / "check")
    assert len(problems) == 1 and problems[0].startswith("the real tritonserver cannot run: no tritonserver at ")


@pytest.mark.skipif(REAL.missing() is not None, reason=f"{NOT_INSTALLED}: {REAL.missing()}")
def test_the_stage_check_serves_one_inference_through_the_real_tritonserver(tmp_path):
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_lib" / "triton_check.py"),
                          str(REAL.venv_bin / "python"), str(tmp_path / "check")],
                         capture_output=True, text=True, timeout=180, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("tritonserver ready in ") and run.stderr == ""
    assert "successfully loaded 'double_small'" in (tmp_path / "check" / "triton.log").read_text()


@pytest.mark.slow
@needs_perf_analyzer
def test_ours_on_two_front_ends_is_measured_beside_ours(tmp_path):
    result, _ = bench(tmp_path, "vs", "--vs-triton", "--quick", "--servers", "ours", "--vs-cases", "grpc-16-c1",
                        "--ours-frontends", "2")
    assert result["servers"] == ["ours", "ours-fe2"]
    assert sorted(result["samples"]) == ["ours-fe2/grpc-16-c1", "ours/grpc-16-c1"]
    fe = result["samples"]["ours-fe2/grpc-16-c1"][0]
    assert fe["requests"] > 0 and fe["cpu_us"]["front-end"] > 0 and fe["cpu_us"]["workers"] > 0
    log = (tmp_path / "vs" / "v1-ours-fe2-server.log").read_text()
    assert "pytriton server ready (2 front-end processes)" in log
    doc = (tmp_path / "report.md").read_text()
    row = table_row(doc[doc.index("### Ours on 2 front-end processes"):], "gRPC, 16 floats, c=1")
    assert row[1] == "–" and number(row[2]) > 0  # (no Triton in this run)
