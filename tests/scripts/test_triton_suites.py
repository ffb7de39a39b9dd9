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
    assert [s["processes"] for s in (result["samples"]["ours/1"][0], result["samples"]["ours/2"][0])] == [2, 3]
    doc = (tmp_path / "report.md").read_text()
    assert "## Throughput and latency on one model repository (issue 37)" in doc  # (kept by the other suite)
    row = table_row(doc, "2")  # models | Triton ready, PSS, processes | ours ready, PSS, processes | ratios
    assert row[1:4] == ["–"] * 3 and number(row[4]) > 0 and number(row[5]) > 0 and row[6] == "3"
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
