"""scripts/bench's options, --from-results end to end (no server, no perf_analyzer), server-log checks."""

from __future__ import annotations

import pathlib

import pytest
from bench_lib import bench
from bench_lib.cases import Case
from bench_lib.servers import log_problems


def test_defaults():
    args = bench.parse_args([])
    assert args.repeats == 3 and args.servers == ["ours", "nvidia", "repo"]
    assert len(args.cases_main) == 8 and len(args.cases_batched) == 2
    assert (args.concurrency, args.interval, args.max_trials, args.stability) == ("1:8:7", 1500, 6, 50)
    assert args.out_dir.is_absolute() and args.out_dir.parent.name == "results"


def test_quick_and_explicit_options(tmp_path):
    args = bench.parse_args(["--quick", "--servers", "ours", "--out-dir", str(tmp_path / "o")])
    assert args.repeats == 1 and args.servers == ["ours"] and args.cases_batched == []
    assert [c.key for c in args.cases_main] == ["grpc-small-none", "http-small-none", "grpc-1mib-none",
                                                "http-1mib-system"]
    assert args.out_dir == tmp_path / "o"
    args = bench.parse_args(["--quick", "--repeats", "2", "--cases", "grpc-1mib-system,http-small-none-batched"])
    assert args.repeats == 2
    assert (args.cases_main, args.cases_batched) == ([Case("grpc", "1mib", "system")],
                                                     [Case("http", "small", "none", "dynamic")])
    opts = bench.pa_options(bench.parse_args(["--interval", "900", "--pa-timeout", "30"]))
    assert (opts.interval_ms, opts.timeout_s, opts.max_trials) == (900, 30, 6)


def test_inprocess_options():
    assert (bench.parse_args([]).inprocess_duration, bench.parse_args(["--quick"]).inprocess_duration) == (3.0, 1.0)
    args = bench.parse_args(["--inprocess-only", "--inprocess-duration", "0.5"])
    assert (args.repeats, args.no_doc, args.no_inprocess, args.inprocess_duration) == (0, True, False, 0.5)
    assert bench.parse_args(["--no-inprocess"]).no_inprocess is True


@pytest.mark.parametrize("argv", [["--cases", "grpc-small-nope"], ["--servers", "ours,triton"],
                                  ["--repeats", "x"], ["--inprocess-only", "--no-inprocess"]])
def test_bad_options_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_from_results_rewrites_the_report(data, tmp_path, capsys, monkeypatch):
    doc, png = tmp_path / "bench.md", tmp_path / "bench.png"
    plotted = []
    monkeypatch.setattr(bench, "plot", lambda path, *_: plotted.append(path) or False)  # plotting: test below
    rc = bench.main(["--from-results", str(data / "results_quick.json"), "--doc", str(doc), "--plot", str(png)])
    assert plotted == [png]
    assert rc == 0  # the recorded run saw no problem
    assert "| gRPC, 1 MiB, no shm | 8 | 602 | 220 | 2.73× | ✅ ≥ 2× |" in doc.read_text()
    assert "HTTP, 1 MiB, system shm" in capsys.readouterr().out
    assert not (tmp_path / "results.json").exists()  # nothing measured, nothing saved


def test_plot(data, tmp_path):
    pytest.importorskip("matplotlib")
    from bench_lib.plot import plot
    from bench_lib.results import aggregate, load_results

    result, meta = load_results(data / "results_quick.json")
    assert plot(tmp_path / "b.png", result, aggregate(result), meta)
    assert (tmp_path / "b.png").read_bytes().startswith(b"\x89PNG")


def test_from_results_without_doc(data, tmp_path):
    doc = tmp_path / "bench.md"
    assert bench.main(["--from-results", str(data / "results_quick.json"), "--no-doc", "--doc", str(doc)]) == 0
    assert not doc.exists()


def test_server_log_checks(tmp_path):
    pkg = tmp_path / "venv" / "lib" / "pytriton"
    pkg.mkdir(parents=True)
    log = pathlib.Path("/x/server.log")
    clean = (f"BENCH pytriton package: {pkg}\n"
             "W0101 12:00:00 model.cc:1] Failed to set config modification time: not found\n"
             "I0101 12:00:01 server.cc:2] ready\n")
    assert log_problems("nvidia", clean, tmp_path / "venv", log) == []
    bad = clean + "E0101 12:00:02 grpc.cc:3] broken pipe\nTraceback (most recent call last):\n"
    assert log_problems("nvidia", bad, tmp_path / "venv", log) == [
        "nvidia: 2 error line(s) in /x/server.log: E0101 12:00:02 grpc.cc:3] broken pipe"]
    assert log_problems("ours", clean, tmp_path / "elsewhere", log) == [
        f"ours: imported pytriton from {pkg}, expected under {tmp_path / 'elsewhere'}"]
    assert log_problems("ours", "ready\n", tmp_path, log) == [
        "ours: the model script did not report its pytriton package (/x/server.log)"]
