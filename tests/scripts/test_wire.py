"""scripts/bench --suite wire: options, row selection, the multi-front-end rows' bookkeeping, targets and the report
(no server, no perf_analyzer, no timing asserts: the figures below are made up)."""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess

import frontend_processes_bench as fpb
import pytest
from bench_lib import bench, wire, wire_report
from bench_lib.servers import ServerSpec


def _s(tp: float, server_us: float = 100.0, client_us: float = 50.0, p50: float = 1000.0) -> list[dict]:
    return [{"throughput": tp, "p50_us": p50, "p99_us": 2 * p50, "wall_s": 10.0, "requests": 1000,
             "server_cpu_us": server_us, "client_cpu_us": client_us, "server_cores": 0.8, "client_cores": 0.4,
             "other_cores": 0.3, "load": 1.5}]


def _result(**over) -> dict:
    samples = {
        # 16 MiB: gRPC 3x and 128/s (= 2 GiB/s each way), HTTP 2x and 64/s; shm 6x (gRPC), 5x (HTTP)
        "large/ours/grpc-none/c2": _s(128, 20000, 9000), "large/nvidia/grpc-none/c2": _s(128 / 3),
        "large/ours/http-none/c2": _s(64), "large/nvidia/http-none/c2": _s(32),
        "large/ours/grpc-system/c2": _s(600), "large/nvidia/grpc-system/c2": _s(100),
        "large/ours/http-system/c2": _s(500), "large/nvidia/http-system/c2": _s(100),
        # 16 floats: gRPC 4x at 64 and 256 and no drop; HTTP 3x at 256 and a drop below c=8's
        "conn/ours/grpc/c8": _s(8000), "conn/nvidia/grpc/c8": _s(2500),
        "conn/ours/grpc/c64": _s(10000), "conn/nvidia/grpc/c64": _s(2500),
        "conn/ours/grpc/c256": _s(10000), "conn/nvidia/grpc/c256": _s(2500),
        "conn/ours/http/c8": _s(9000), "conn/nvidia/http/c8": _s(2000),
        "conn/ours/http/c64": _s(9000), "conn/nvidia/http/c64": _s(2000),
        "conn/ours/http/c256": _s(6000), "conn/nvidia/http/c256": _s(2000),
        "multife/ours/n1-grpc/c64": _s(4000), "multife/ours/n2-grpc/c64": _s(3500),
    }
    result = {"samples": samples, "problems": [], "elapsed_s": 300.0, "load_start": 1.0, "load_end": 2.0,
              "other_cores": 0.3, "machine": {"cpu": "Test CPU", "cpus": "2"}, "repeats": 1,
              "rows": ["large", "conn", "multife"], "interval_ms": 1000, "date": "2026-01-01 00:00 UTC",
              "git": "abc123"}
    result.update(over)
    return result


def test_options():
    args = bench.parse_args(["--suite", "wire"])
    assert args.repeats == 1 and args.wire_rows == ["large", "conn", "multife"]
    assert args.doc.name == "benchmarks-wire.md"
    args = bench.parse_args(["--suite", "wire", "--wire-rows", "multife,large", "--repeats", "2"])
    assert (args.repeats, args.wire_rows) == (2, ["large", "multife"])  # the suite's order, whatever was typed
    assert bench.parse_args(["--suite", "scheduling"]).doc.name == "benchmarks-scheduling.md"
    with pytest.raises(SystemExit):
        bench.parse_args(["--suite", "wire", "--wire-rows", "large,nope"])
    with pytest.raises(ValueError, match="nope"):
        wire.parse_rows("nope")


def test_targets_met_and_missed():
    by = {(t.row, t.what): t for t in wire_report.targets(_result())}
    assert len(by) == 14
    assert by[("16 MiB, gRPC, no shm, c=2", "ours / NVIDIA throughput")].value == pytest.approx(3.0)
    assert by[("16 MiB, gRPC, no shm, c=2", "ours, tensor GiB/s each way")].value == pytest.approx(2.0)
    assert by[("16 MiB, gRPC, no shm, c=2", "ours, tensor GiB/s each way")].met is True
    assert by[("16 MiB, HTTP, no shm, c=2", "ours / NVIDIA throughput")].met is False  # 2.0 < 2.5
    assert by[("16 MiB, HTTP, no shm, c=2", "ours, tensor GiB/s each way")].value == pytest.approx(1.0)
    assert by[("16 MiB, gRPC, system shm, c=2", "ours / NVIDIA throughput")].met is True  # 6.0
    assert by[("16 MiB, HTTP, system shm, c=2", "ours / NVIDIA throughput")].met is False  # 5.0
    assert by[("16 floats, gRPC, c=256", "ours / NVIDIA throughput")].met is True  # 4.0
    assert by[("16 floats, HTTP, c=256", "ours / NVIDIA throughput")].value == pytest.approx(3.0)
    assert by[("16 floats, gRPC, c=64", "ours at c=64 / ours at c=8")].value == pytest.approx(1.25)
    assert by[("16 floats, HTTP, c=64", "ours at c=64 / ours at c=8")].met is True  # 1.0
    assert by[("16 floats, HTTP, c=256", "ours at c=256 / ours at c=8")].met is False  # 0.67


def test_rows_not_run_have_no_targets_and_missing_figures_are_not_measured():
    result = _result(rows=["conn"])
    del result["samples"]["conn/nvidia/http/c64"]
    targets = wire_report.targets(result)
    assert len(targets) == 8 and all(t.row.startswith("16 floats") for t in targets)
    missing = [t for t in targets if t.met is None]
    assert [(t.row, t.what) for t in missing] == [("16 floats, HTTP, c=64", "ours / NVIDIA throughput")]
    assert wire_report.targets(_result(rows=["multife"])) == []


def test_medians_over_repeats_skip_missing_values():
    result = _result()
    result["samples"]["conn/ours/grpc/c8"] = _s(7000) + _s(8000, server_us=120) + _s(9000)
    result["samples"]["conn/ours/grpc/c8"][2]["server_cpu_us"] = None  # a run the server counted nothing in
    assert wire_report.figure(result, "conn/ours/grpc/c8") == 8000
    assert wire_report.figure(result, "conn/ours/grpc/c8", "server_cpu_us") == pytest.approx(110)
    assert wire_report.figure(result, "conn/ours/grpc/c9") is None


def test_figure_rows_cpu_breakdown_and_ceiling():
    rows = {(r[0], r[1], r[2]): r for r in wire_report.figure_rows(_result())}
    grpc = rows[("16 MiB, gRPC, no shm", "pytriton (ours)", "2")]
    # 2 CPUs / (20,000 + 9,000 µs per request) = 69/s; 128/s = 2.00 GiB/s each way
    assert grpc[5] == "2.00" and grpc[6] == "20,000" and grpc[7] == "9,000" and grpc[11] == "69"
    assert grpc[8:11] == ["0.80", "0.40", "0.30"]
    assert rows[("16 floats, gRPC", "NVIDIA PyTriton", "256")][5] == "–"  # GiB/s only for the 16 MiB rows
    assert ("16 floats, gRPC, --frontend-processes 2", "pytriton (ours)", "64") in rows
    keys = [(r[0], r[2]) for r in wire_report.figure_rows(_result())]
    assert keys.index(("16 floats, gRPC", "8")) < keys.index(("16 floats, gRPC", "64")) \
        < keys.index(("16 floats, gRPC", "256"))  # concurrencies in order, not as strings


def test_summary_and_markdown_state_every_target():
    result = _result(problems=["w1-nvidia-large-grpc-none: perf_analyzer exited 99"])
    text = wire_report.summary(result)
    assert text.count("(target ") == 14 and "MISSED" in text and "exited 99" in text
    md = wire_report.markdown(result)
    assert md.startswith("# Benchmarks: wire") and "do not edit by hand" in md
    assert "| 16 MiB, gRPC, no shm, c=2 | ours, tensor GiB/s each way | 2.00 | >= 2 | yes |" in md
    assert md.count("| **no** |") == 5 and "## Problems seen" in md and "Test CPU" in md
    header = next(line for line in md.splitlines() if line.startswith("| case |"))
    assert header.count("|") - 1 == len(wire_report.FIGURE_HEADER) == 12


def test_from_results_writes_the_report(tmp_path):
    res = tmp_path / "results.json"
    res.write_text(json.dumps(_result()))
    doc = tmp_path / "wire.md"
    assert bench.main(["--suite", "wire", "--from-results", str(res), "--doc", str(doc)]) == 0
    assert doc.read_text().startswith("# Benchmarks: wire")
    res.write_text(json.dumps(_result(problems=["x"])))
    assert bench.main(["--suite", "wire", "--from-results", str(res), "--no-doc"]) == 1


def test_sample_per_request_figures():
    s = wire.sample(100.0, 1.0, 2.0, wall_s=4.0, requests=400, server_cpu_s=2.0, client_cpu_s=1.0,
                    other_cpu_s=0.4, load=3.0)
    assert (s["server_cpu_us"], s["client_cpu_us"]) == (5000, 2500)
    assert (s["server_cores"], s["client_cores"], s["other_cores"]) == (0.5, 0.25, 0.1)
    none = wire.sample(0.0, 0.0, 0.0, wall_s=1.0, requests=0, server_cpu_s=1.0, client_cpu_s=1.0, other_cpu_s=0.0,
                       load=0.0)
    assert none["server_cpu_us"] is None and none["client_cpu_us"] is None


def _args(tmp_path: pathlib.Path, rows: list[str], servers: list[str], repeats: int = 2) -> argparse.Namespace:
    return argparse.Namespace(wire_rows=rows, servers=servers, repeats=repeats, out_dir=tmp_path, interval=1000,
                              startup_timeout=5.0, settle=0.0)


def test_row_selection_and_alternating_order(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(wire.WireBench, "large", lambda self, rep, name: calls.append(("large", rep, name)))
    monkeypatch.setattr(wire.WireBench, "conn", lambda self, rep, name: calls.append(("conn", rep, name)))
    monkeypatch.setattr(wire.WireBench, "multife", lambda self, rep: calls.append(("multife", rep, "ours")))
    opts = bench.pa_options(bench.parse_args(["--suite", "wire"]))
    result = wire.WireBench(_args(tmp_path, ["large", "multife"], ["ours", "nvidia"]), opts, {}).run()
    assert calls == [("large", 0, "ours"), ("large", 0, "nvidia"), ("multife", 0, "ours"),
                     ("large", 1, "nvidia"), ("large", 1, "ours"), ("multife", 1, "ours")]
    assert result["rows"] == ["large", "multife"] and result["repeats"] == 2 and result["samples"] == {}
    calls.clear()
    wire.WireBench(_args(tmp_path, ["conn", "multife"], ["nvidia"], repeats=1), opts, {}).run()
    assert calls == [("conn", 0, "nvidia")]  # multife is ours only


class _FakeProcess:
    pid, returncode = 4242, 0


def test_multife_rows_reuse_frontend_processes_bench(tmp_path, monkeypatch):
    started, stopped, measured = [], [], []

    def start(processes, instances, log, extra=None, python="py"):
        started.append((processes, instances, tuple(extra or ()), python))
        if processes == 2:
            raise RuntimeError("server did not start:\nboom")
        return _FakeProcess(), {"grpc": 1, "http": 2}

    def measure(pa, protocol, port, http_port, server, interval_ms, tmp, concurrency=64, max_trials=4):
        assert (port, http_port, concurrency, max_trials) == ({"grpc": 1, "http": 2}[protocol], 2, 64, 6)
        measured.append(protocol)
        if protocol == "grpc":  # an error: reported as its first and last line, not retried
            raise RuntimeError("perf_analyzer failed:\n*** Measurement Settings ***\nerror: connection refused")
        if measured.count("http") == 1:  # no stable window: retried once
            raise RuntimeError("perf_analyzer failed:\nRequest concurrency: 64\nFailed to obtain stable measurement")
        return {"throughput": 1000.0, "p50_ms": 2.0, "p99_ms": 5.0, "requests": 4000, "wall_s": 4.0,
                "server_cpu_us_per_req": 300, "pa_cpu_us_per_req": 100}

    monkeypatch.setattr(fpb, "start", start)
    monkeypatch.setattr(fpb, "measure", measure)
    monkeypatch.setattr(fpb, "stop", lambda server: stopped.append(server.pid))
    opts = bench.pa_options(bench.parse_args(["--suite", "wire"]))
    specs = {"ours": ServerSpec("ours", pathlib.Path("/venv/bin/python"), {})}
    wb = wire.WireBench(_args(tmp_path, ["multife"], ["ours"], repeats=1), opts, specs)
    wb.multife(0)
    assert started == [(1, 2, tuple(fpb.BATCHING_ARGS), "/venv/bin/python"),
                       (2, 1, tuple(fpb.BATCHING_ARGS), "/venv/bin/python")]
    assert stopped == [4242]  # the launch that started was stopped; the one that failed left a problem
    assert measured == ["grpc", "http", "http"]
    assert wb.problems == ["w1-ours-multife1 grpc: perf_analyzer failed: ... error: connection refused",
                           f"w1-ours-multife2: server did not start: (log {tmp_path / 'w1-ours-multife2-server.log'})"]
    assert set(wb.samples) == {"multife/ours/n1-http/c64"}
    s = wb.samples["multife/ours/n1-http/c64"][0]
    assert (s["throughput"], s["p50_us"], s["server_cpu_us"], s["client_cpu_us"]) == (1000.0, 2000.0, 300, 100)
    assert s["server_cores"] == pytest.approx(0.3) and s["client_cores"] == pytest.approx(0.1)


def test_frontend_processes_bench_shapes_and_table(tmp_path):
    assert fpb.shapes([1, 2, 4, 8], 8) == [(1, 8), (2, 4), (4, 2), (8, 1)]
    with pytest.raises(ValueError, match=r"--processes \[3\]"):
        fpb.shapes([1, 3], 8)
    assert fpb.int_list("64,256,") == [64, 256]
    row = {"protocol": "grpc", "throughput": 4000.0, "p50_ms": 15.0, "p99_ms": 30.0, "requests": 8000,
           "wall_s": 4.0, "server_cpu_us_per_req": 300, "pa_cpu_us_per_req": 60, "machine_busy_cores": 2.0,
           "repeat": 0, "frontend_processes": 4}
    saved = tmp_path / "runs.jsonl"
    saved.write_text(json.dumps(row) + "\n" + json.dumps(dict(row, concurrency=256, frontend_processes=8)) + "\n")
    out = subprocess.run([bench.sys.executable, str(pathlib.Path(fpb.__file__)), "--summarize", str(saved)],
                         capture_output=True, text=True, check=True).stdout
    # a row saved before the concurrency was recorded reads as c = 64; other load = 2.0 - (300 + 60) * 2000 / 1e6
    assert "| 4 | grpc | 64 | 0 | 4,000 | 15.0 | 30.0 | 300 | 60 | 1.28 |" in out
    assert "| 8 | grpc | 256 | 0 |" in out


def test_frontend_processes_bench_markdown_states_the_settings():
    args = argparse.Namespace(processes="1,2,4,8", workers=8, batching=True, concurrency="64,256", interval=2000,
                              repeats=1)
    row = {"protocol": "http", "concurrency": 256, "throughput": 9000.0, "p50_ms": 20.0, "p99_ms": 40.0,
           "requests": 36000, "wall_s": 4.0, "server_cpu_us_per_req": 200, "pa_cpu_us_per_req": 50,
           "machine_busy_cores": 3.0, "repeat": 0, "frontend_processes": 8}
    md = fpb.markdown(args, [row], 0.5, 300.0)
    assert md.startswith("# Front-end processes: N = 1,2,4,8")
    assert "8 workers in every row" in md and "dynamic batching on" in md and "c = 64,256" in md
    assert "| 8 | http | 256 | 0 | 9,000 | 20.0 | 40.0 | 200 | 50 | 0.75 |" in md


def test_leftovers_of_a_stopped_server(tmp_path, monkeypatch):
    gone = subprocess.Popen(["true"])
    gone.wait()
    alive = subprocess.Popen(["sleep", "60"])
    try:
        tree = {gone.pid: 111, alive.pid: wire.procfs.start_time(alive.pid)}
        segment = tmp_path / "pytriton-left"  # stands for a /dev/shm file: any path the check finds still there
        segment.write_bytes(b"x")
        found = wire.leftovers(tree, {str(segment), str(tmp_path / "removed")}, wait_s=0.2)
        assert found == [f"process {alive.pid} outlived the server; killed", f"{segment} left in /dev/shm; removed"]
        assert alive.wait(5) == -9 and not segment.exists()
    finally:
        if alive.poll() is None:
            alive.kill()
            alive.wait()
    assert wire.leftovers({}, set()) == []


def test_frontend_processes_bench_retry_and_failures(monkeypatch):
    calls = []

    def measure(*args):
        calls.append(args)
        if len(calls) == 1 or args[1] == "http":
            raise RuntimeError("perf_analyzer failed:\nRequest concurrency: 64\nFailed to obtain stable measurement.")
        return {"ok": True}

    monkeypatch.setattr(fpb, "measure", measure)
    assert fpb.measure_retried("pa", "grpc") == {"ok": True} and len(calls) == 2
    with pytest.raises(RuntimeError) as raised:
        fpb.measure_retried("pa", "http")  # unstable twice: the error after one retry
    assert len(calls) == 4
    assert fpb.failure_line(raised.value) == "perf_analyzer failed: ... Failed to obtain stable measurement."
    monkeypatch.setattr(fpb, "measure", lambda *a: (_ for _ in ()).throw(RuntimeError("server gone")))
    with pytest.raises(RuntimeError, match="server gone"):  # any other failure: no retry
        fpb.measure_retried("pa", "grpc")
    args = argparse.Namespace(processes="1,2", workers=2, batching=False, concurrency="64", interval=1000, repeats=1)
    md = fpb.markdown(args, [], 1.0, 10.0, ["N = 2 http c = 64: perf_analyzer failed: ... Failed"])
    assert "dynamic batching off" in md and "Runs that gave no figure:\n\n- N = 2 http c = 64" in md


# ------------------------------------------------------------------- connfe: ours with N front-end processes ---
def _connfe_result(**over) -> dict:
    result = _result(rows=["conn", "connfe"], frontends=[2, 8])
    result["samples"].update({
        # gRPC: N=2 3x at 64, 4x at 256; N=8 5x at both. HTTP: N=2 4.5x at 64 and nothing at 256; N=8 2x at both
        "connfe/ours/n2-grpc/c8": _s(6000), "connfe/ours/n2-grpc/c64": _s(7500), "connfe/ours/n2-grpc/c256": _s(10000),
        "connfe/ours/n8-grpc/c64": _s(12500), "connfe/ours/n8-grpc/c256": _s(12500),
        "connfe/ours/n2-http/c64": _s(9000), "connfe/ours/n8-http/c64": _s(4000), "connfe/ours/n8-http/c256": _s(4000),
    })
    result.update(over)
    return result


def test_wire_frontends_option():
    assert bench.parse_args(["--suite", "wire"]).wire_frontends == [2]
    args = bench.parse_args(["--suite", "wire", "--wire-rows", "connfe,conn", "--wire-frontends", "8, 4,8,"])
    assert (args.wire_rows, args.wire_frontends) == (["conn", "connfe"], [8, 4])  # as typed, each once
    for bad in ("0", "two", "4,-1", ",", "1.5"):
        with pytest.raises(SystemExit):
            bench.parse_args(["--suite", "wire", "--wire-frontends", bad])
    with pytest.raises(ValueError, match="'0' is not a number of front-end processes"):
        wire.parse_frontends("2,0")
    with pytest.raises(ValueError, match="no number"):
        wire.parse_frontends(" , ")


def test_connfe_launches_beside_nvidias_conn(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(wire.WireBench, "conn", lambda self, rep, name: calls.append(("conn", rep, name)))
    monkeypatch.setattr(wire.WireBench, "connfe", lambda self, rep, n: calls.append(("connfe", rep, n)))
    opts = bench.pa_options(bench.parse_args(["--suite", "wire"]))

    def run(rows: list[str], servers: list[str], repeats: int = 2) -> dict:
        calls.clear()
        args = _args(tmp_path, rows, servers, repeats)
        args.wire_frontends = [4, 8]
        return wire.WireBench(args, opts, {}).run()

    result = run(["connfe"], ["ours", "nvidia"])  # without conn: NVIDIA's conn launch still runs, for the ratios
    assert calls == [("conn", 0, "nvidia"), ("connfe", 0, 4), ("connfe", 0, 8),
                     ("connfe", 1, 8), ("connfe", 1, 4), ("conn", 1, "nvidia")]
    assert result["frontends"] == [4, 8] and result["rows"] == ["connfe"]
    run(["conn", "connfe"], ["nvidia", "ours"], repeats=1)
    assert calls == [("conn", 0, "ours"), ("conn", 0, "nvidia"), ("connfe", 0, 4), ("connfe", 0, 8)]
    run(["connfe"], ["ours"], repeats=1)
    assert calls == [("connfe", 0, 4), ("connfe", 0, 8)]  # no NVIDIA: ours alone, the ratios not measured
    run(["conn", "connfe"], ["nvidia"], repeats=1)
    assert calls == [("conn", 0, "nvidia")]  # connfe is ours
    assert run(["conn"], ["ours"], repeats=1)["frontends"] == []


def test_connfe_serves_the_repository_model_through_the_cli(tmp_path, monkeypatch):
    served = []
    monkeypatch.setattr(wire.WireBench, "_serve", lambda self, server, tag, body: served.append((server, tag)))
    args = _args(tmp_path, ["connfe"], ["ours", "nvidia"], 1)
    specs = bench.server_specs(bench.parse_args(["--suite", "wire", "--servers", "ours",
                                                 "--ours-python", "/opt/wrapper-python"]))
    wire.WireBench(args, bench.pa_options(bench.parse_args(["--suite", "wire"])), specs).connfe(0, 8)
    (server, tag), = served
    try:
        assert tag == "w1-ours-connfe8" and server.spec.name == "repo" and server.models == ["double_small"]
        cmd = server.cmd()
        assert cmd[:4] == ["/opt/wrapper-python", "-m", "pytriton.cli", "serve"]  # --ours-python, even without repo
        assert cmd[-2:] == ["--frontend-processes", "8"]
        repo = pathlib.Path(cmd[cmd.index("--model-repository") + 1])
        config = (repo / "double_small" / "config.pbtxt").read_text()
        # conn's settings: max batch 64, the dynamic batcher with delay 0; one instance (in each front-end process)
        assert "max_batch_size: 64" in config and "dynamic_batching { }" in config and "count: 1 " in config
    finally:
        server.stop()  # never started: releases its TMPDIR


class _Running:
    pid = 1

    def __init__(self, code: int | None = None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code


def test_connfe_waits_for_the_group_and_checks_its_tree(tmp_path, monkeypatch):
    args = _args(tmp_path, ["connfe"], ["ours"], 1)
    args.startup_timeout = 0.3
    wb = wire.WireBench(args, bench.pa_options(bench.parse_args(["--suite", "wire"])), {})
    server = wire.Server(ServerSpec("repo", pathlib.Path("py"), {}), "dynamic", ["double_small"],
                         tmp_path / "server.log", tmp_path)
    try:
        cmdlines = {10: "py -m pytriton.cli serve", 11: "py -m pytriton.server {}", 12: "py -m pytriton.server {}",
                    13: "py worker", 14: "py worker"}
        monkeypatch.setattr(server, "refresh_tree", lambda: list(cmdlines))
        monkeypatch.setattr(wire.procfs, "cmdline", lambda pid: cmdlines[pid])
        server.proc = _Running()  # type: ignore[assignment]
        # a front-end process's own ready line is not the group's: times out
        server.logfile.write_text("pytriton server ready\n")
        assert not wb._group_ready(server, 2, "t") and "within 0 s" in wb.problems.pop()
        server.logfile.write_text("pytriton server ready\npytriton server ready (2 front-end processes)\n")
        assert wb._group_ready(server, 2, "t") and wb.problems == []
        del cmdlines[12]  # a front-end process the tree does not show: its CPU would be left out
        assert not wb._group_ready(server, 2, "t")
        assert wb.problems.pop() == ("t: 1 front-end processes in the server's process tree, expected 2: its CPU "
                                     "per request would leave some out")
        assert wb._group_ready(server, 1, "t")  # N = 1: the CLI's process serves itself
        server.proc = _Running(1)  # type: ignore[assignment]  # exited: no waiting for the deadline
        server.logfile.write_text("")
        assert not wb._group_ready(server, 1, "t") and "'pytriton server ready'" in wb.problems.pop()
    finally:
        server.proc = None
        server.stop()


def test_connfe_targets_beside_conns():
    by = {(t.row, t.what): t for t in wire_report.targets(_connfe_result())}
    assert len(by) == 8 + 8  # conn's (unchanged) and 2 N x 2 protocols x c = 64, 256
    assert by[("16 floats, gRPC, c=64", "ours / NVIDIA throughput")].value == pytest.approx(4.0)  # conn: N = 1
    assert by[("16 floats, gRPC, c=64", "ours N=2 / NVIDIA throughput")].value == pytest.approx(3.0)
    assert by[("16 floats, gRPC, c=64", "ours N=2 / NVIDIA throughput")].met is False
    assert by[("16 floats, gRPC, c=256", "ours N=2 / NVIDIA throughput")].met is True  # 4.0
    assert by[("16 floats, gRPC, c=256", "ours N=8 / NVIDIA throughput")].value == pytest.approx(5.0)
    assert by[("16 floats, HTTP, c=64", "ours N=2 / NVIDIA throughput")].value == pytest.approx(4.5)
    assert by[("16 floats, HTTP, c=256", "ours N=2 / NVIDIA throughput")].met is None  # not measured
    assert by[("16 floats, HTTP, c=256", "ours N=8 / NVIDIA throughput")].met is False  # 2.0
    assert not any("c=8" in t.row and "N=" in t.what for t in by.values())
    # connfe alone: NVIDIA's conn figures were taken for it; no conn targets (ours N = 1 not run)
    alone = wire_report.targets(_connfe_result(rows=["connfe"]))
    assert len(alone) == 8 and all("N=" in t.what for t in alone)
    # a result without the list: the N from the figures' keys
    assert wire_report.frontends(_connfe_result(frontends=None)) == [2, 8]


def test_connfe_figures_and_report_text():
    result = _connfe_result()
    rows = [(r[0], r[1], r[2]) for r in wire_report.figure_rows(result)]
    at64 = [r for r in rows if r[0].startswith("16 floats, gRPC") and r[2] == "64"]
    assert at64[4:] == [("16 floats, gRPC, --frontend-processes 1", "pytriton (ours)", "64"),
                        ("16 floats, gRPC, --frontend-processes 2", "pytriton (ours)", "64")]  # multife's, after
    assert at64[:4] == [("16 floats, gRPC", "pytriton (ours)", "64"), ("16 floats, gRPC", "NVIDIA PyTriton", "64"),
                    ("16 floats, gRPC, N=2 front-end processes", "pytriton (ours)", "64"),
                    ("16 floats, gRPC, N=8 front-end processes", "pytriton (ours)", "64")]  # side by side
    text = wire_report.summary(result)
    assert text.count("(target ") == 16 and "ours N=8 / NVIDIA throughput = 5.00 (target >= 4): MET" in text
    assert "one instance per process; NVIDIA: its default single server, one instance" in text
    assert "16 floats, HTTP, N=8 front-end processes" in text
    md = wire_report.markdown(result)
    assert "| 16 floats, HTTP, c=256 | ours N=2 / NVIDIA throughput | – | >= 4 | not measured |" in md
    assert "--frontend-processes N` (N = 2, 8;" in md and "one instance per process, N in all" in md
    assert "NVIDIA PyTriton's default single server (one tritonserver, one instance)" in md
    assert "N front-end processes" not in wire_report.summary(_result())  # no connfe: no note


def test_connfe_launch_for_real(tmp_path):
    """`pytriton serve --frontend-processes 2` on the repository model, as the connfe row starts it: the group's
    ready line is the one the row waits for, the tree holds both front-end processes and their workers, the stop
    leaves nothing (no perf_analyzer)."""
    args = bench.parse_args(["--suite", "wire", "--wire-rows", "connfe", "--servers", "ours",
                             "--out-dir", str(tmp_path)])
    wb = wire.WireBench(args, bench.pa_options(args), bench.server_specs(args))
    server = wire.Server(wb.specs["repo"], "dynamic", ["double_small"], tmp_path / "server.log", tmp_path,
                         ["--frontend-processes", "2"])
    try:
        assert server.start(60), server.problems
        assert wb._group_ready(server, 2, "t"), wb.problems
        tree = server.refresh_tree()
        workers = [p for p in tree if "pytriton.backends.worker" in wire.procfs.cmdline(p)]
        templates = [p for p in tree if "pytriton.backends.template" in wire.procfs.cmdline(p)]
        # the CLI's process, 2 front-end processes, a worker each (forked from each one's worker template, if any)
        assert len(workers) == 2 and len(templates) in (0, 2) and len(tree) == 3 + len(templates) + len(workers)
        assert server.inference_count("double_small") == 0
    finally:
        server.stop()
    assert server.problems == [] and server.scan_log() == [] and wb.problems == []
