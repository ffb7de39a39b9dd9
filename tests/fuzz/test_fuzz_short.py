"""A short run of every fuzz harness: its seeds replayed here (every check, allocations traced), then a fixed number
of atheris inputs in a child process (deterministic: libFuzzer's seed is fixed), which must find nothing. The
runner's own test plants faults (`selftest.py`) and expects them reported; `check` is tested on small harnesses."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fuzz.harness import HARNESSES, REPO, SHM_PREFIX, Finding, Harness, check, corpus_files, load, watch_errors

pytest.importorskip("atheris")

PUBLIC = [name for name in HARNESSES if not name.startswith("_")]
RUNS = 400  # atheris inputs per harness (the seeds included)


@pytest.mark.parametrize("name", PUBLIC)
def test_seeds_replay_without_finding(name: str) -> None:
    files = corpus_files(name)
    assert files, f"no seeds in tests/fuzz/corpus/{name}"
    harness = load(name)
    harness.setup()
    watch_errors()
    try:
        for _ in range(2):  # (the first pass warms caches and first-use imports, as the runner does)
            findings = {path.name: result.finding for path in files
                        if (result := check(harness, path.read_bytes())).finding is not None}
    finally:
        harness.close()
    assert not findings, "\n\n".join(f"{name}: {finding}" for name, finding in findings.items())


def _fuzz(tmp_path: Path, name: str, runs: int) -> tuple[subprocess.CompletedProcess, list[dict]]:
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "tests.fuzz.run", "--runs", str(runs), "--seed", "1",
                           "--out", str(out), name], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert (out / "summary.json").is_file(), done.stdout + done.stderr
    return done, json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("name", PUBLIC)
def test_short_fuzz_run_finds_nothing(tmp_path: Path, name: str) -> None:
    before = set(Path("/dev/shm").glob(f"{SHM_PREFIX}*"))
    done, summary = _fuzz(tmp_path, name, RUNS)
    left = [path.name for path in set(Path("/dev/shm").glob(f"{SHM_PREFIX}*")) - before
            if not Path(f"/proc/{int(path.name[len(SHM_PREFIX):])}").exists()]  # (a live process's is in use)
    assert not left, f"a harness process left its shared-memory segment: {left}"
    result = summary[0]
    log = "".join(line for line in Path(result["log"]).read_text(errors="replace").splitlines(keepends=True)
                  if not line.startswith("INFO: Instrumenting"))
    assert done.returncode == 0, done.stdout + done.stderr + "\n" + log[-4000:]
    assert result["findings"] == []
    assert result["executions"] == RUNS
    assert result["coverage"] > 0


def test_runner_reports_findings_and_keeps_their_inputs(tmp_path: Path) -> None:
    done, summary = _fuzz(tmp_path, "_selftest", 50)
    assert done.returncode == 1, done.stdout
    result = summary[0]
    assert [f.split(":")[0] for f in result["findings"]] == ["KeyError at tests/fuzz/selftest.py", "planted check"]
    findings = Path(result["findings_dir"])
    kept = sorted(p.read_bytes()[:3] for p in findings.glob("*.bin"))
    assert kept == [b"BAD", b"BUG"]
    assert "KeyError: 'planted'" in "".join(p.read_text() for p in findings.glob("*.txt"))
    assert "finding: KeyError at tests/fuzz/selftest.py:" in done.stdout


class _Probe(Harness):
    """Does what its input says: sleep (wall clock, not CPU), spin, allocate, log an error, or raise."""

    memory_fixed = 1 << 20
    memory_per_byte = 0

    def one_input(self, data: bytes) -> None:
        if data == b"spin":
            end = time.process_time() + 1.2
            while time.process_time() < end:
                pass
        elif data == b"sleep":
            time.sleep(1.2)  # the subject: 1.2 s of wall clock past the CPU bound that "spin" crosses is no finding
        elif data == b"allocate":
            block = bytearray(2 << 20)
            del block
        elif data == b"log":
            logging.getLogger("pytriton.frontend").error("handler failed")
        elif data == b"check":
            raise Finding("its own check", "detail")
        elif data == b"raise":
            dict[str, int]()["missing"]


@pytest.mark.parametrize("data, signature", [
    (b"fine", None), (b"sleep", None), (b"spin", "slow input"), (b"allocate", "allocation past the bound"),
    (b"log", "error logged at test_fuzz_short.py:"), (b"check", "its own check"),
    (b"raise", "KeyError at tests/fuzz/test_fuzz_short.py:"),
])
def test_check(data: bytes, signature: str | None) -> None:
    watch_errors()
    result = check(_Probe(), data)
    if signature is None:
        assert result.finding is None
    else:
        assert result.signature.startswith(signature), result
    assert check(_Probe(), b"allocate", trace=False).finding is None  # (untraced: only the address-space limit)
