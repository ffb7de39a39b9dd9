"""scripts/flake-hunt's report: every test that failed in any run, counted across runs, from pytest's JUnit XML."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests._support.flake_report import report

REPO = Path(__file__).resolve().parents[2]


def _junit(path: Path, failed: dict[str, str], passed: list[str]) -> None:
    cases = [f'<testcase classname="tests.m" name="{name}"><failure message="{message}">trace</failure></testcase>'
             for name, message in failed.items()]
    cases += [f'<testcase classname="tests.m" name="{name}"/>' for name in passed]
    path.write_text(f'<testsuites><testsuite name="pytest">{"".join(cases)}</testsuite></testsuites>')


def test_a_test_failing_in_some_runs_is_reported_with_its_count_and_message(tmp_path):
    _junit(tmp_path / "run-1.xml", {"test_flaky": "assert 1 == 2"}, ["test_ok"])
    _junit(tmp_path / "run-2.xml", {}, ["test_ok", "test_flaky"])
    _junit(tmp_path / "run-3.xml", {"test_flaky": "timeout", "test_other": "boom"}, ["test_ok"])
    text, failed = report(tmp_path, 3)
    assert failed == 2
    assert "3 runs; 2 test(s) failed at least once" in text
    assert "- tests.m::test_flaky: failed in 2/3 runs\n    assert 1 == 2" in text
    assert "- tests.m::test_other: failed in 1/3 runs" in text
    assert "test_ok" not in text


def test_a_run_without_results_counts_as_a_failure(tmp_path):
    _junit(tmp_path / "run-1.xml", {}, ["test_ok"])
    text, failed = report(tmp_path, 2)
    assert failed == 1 and "<run run-2: no results, see its log>" in text


def test_flake_hunt_runs_the_tests_n_times_and_exits_0_when_none_failed():
    result = subprocess.run([str(REPO / "scripts" / "flake-hunt"), "2", "tests/scripts/test_soak_tally.py"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "2 runs; 0 test(s) failed at least once" in result.stdout
    assert result.stderr.count("[flake-hunt] run ") == 2
    sys.stdout.write(result.stderr)
