"""perf_analyzer: the command line, and parsing what it writes (recorded output of a real run)."""

from __future__ import annotations

import pathlib

from bench_lib import perf_analyzer as pa
from bench_lib.cases import Case
from bench_lib.results import PaCounts

OPTS = pa.PaOptions(binary=pathlib.Path("/opt/pa"), interval_ms=1500, max_trials=6, stability=50, timeout_s=120)


def test_csv_of_a_recorded_run(data):
    rows = pa.read_csv(data / "pa_ours_grpc_small_none.csv")
    assert rows == [pa.CsvRow(1, 1263.12, 751.0, 997.0, 2194.0), pa.CsvRow(8, 2465.12, 3119.0, 3894.0, 7730.0)]


def test_csv_without_measurements():
    header = "Concurrency,Inferences/Second,p50 latency,p90 latency,p99 latency\n"
    assert pa.parse_csv(header) == []
    assert pa.parse_csv(header + "\n,,,,\n") == []
    assert pa.read_csv(pathlib.Path("/nonexistent/run.csv")) == []


def test_console_counts_of_a_recorded_run(data):
    counts = pa.parse_text((data / "pa_ours_grpc_small_none.txt").read_text())
    assert counts == {1: PaCounts(6825, 6826, 6826), 8: PaCounts(13329, 13330, 13330)}
    assert pa.error_lines((data / "pa_ours_grpc_small_none.txt").read_text()) == []


def test_console_counts_belong_to_their_side():
    text = """Request concurrency: 4
  Client:
    Request count: 100
  Server:
    Inference count: 90
Request concurrency: 5
  Server:
    Request count: 7
"""
    counts = pa.parse_text(text)
    assert counts[4] == PaCounts(client_count=100, server_count=90)
    assert counts[5] == PaCounts()  # a "Request count" on the server side is not the client's


def test_error_lines_skip_the_stability_notice():
    text = "Failed to obtain stable measurement within 6 windows\nerror: connection refused\nall good\n"
    assert pa.error_lines(text) == ["error: connection refused"]


def test_count_mismatch_allows_the_edges():
    assert pa.count_mismatch(8, PaCounts(1000, 1018)) is None  # 2c + 2
    assert pa.count_mismatch(8, PaCounts(1000, 1019)) == "server inference count 1019 != client request count 1000"
    assert pa.count_mismatch(1, PaCounts(100_000, 100_900)) is None  # 1 %
    assert pa.count_mismatch(1, PaCounts(client_count=5)) is None


def test_verdict(tmp_path):
    txt = tmp_path / "run.txt"
    assert pa.verdict("t", 0, False, False, [], OPTS, txt) is None
    assert pa.verdict("t", 2, False, True, [], OPTS, txt) is None  # could not stabilise: retried, not a problem
    assert pa.verdict("t", 2, False, False, ["x"], OPTS, txt) == f"t: perf_analyzer exited 2 ({txt}): x"
    assert pa.verdict("t", -9, True, False, [], OPTS, txt) == f"t: perf_analyzer killed after 120 s ({txt})"
    assert pa.verdict("t", 0, False, False, ["a", "b", "c", "d"], OPTS, txt) == \
        f"t: perf_analyzer printed errors ({txt}): a | b | c"


def test_command():
    cmd = pa.command(OPTS, Case("http", "1mib", "system"), 8000, "1:8:7", pathlib.Path("/o/r.csv"))
    assert cmd[0] == "/opt/pa"
    flags = dict(zip(cmd[1::2], cmd[2::2]))
    assert flags == {"-m": "double_1mib", "-i": "http", "-u": "127.0.0.1:8000", "--shared-memory": "system",
                     "--concurrency-range": "1:8:7", "-b": "1", "--measurement-interval": "1500",
                     "--max-trials": "6", "--stability-percentage": "50", "--input-data": "zero", "-f": "/o/r.csv"}
