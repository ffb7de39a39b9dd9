"""A short bounded run of scripts/shm_deadline_race.py (issue 40's targeted repro): clients that alternate a
short-deadline call and a normal one on the same shared-memory regions, beside plain load, read only right answers."""

from __future__ import annotations

import json
import subprocess
import sys

from tests._support.paths import SCRIPTS

CALLS = 400


def test_a_short_run_finds_no_wrong_answer_and_leaves_nothing_behind():
    done = subprocess.run([sys.executable, str(SCRIPTS / "shm_deadline_race.py"), "--calls", str(CALLS),
                           "--deadline-ms", "0.2,1", "--max-seconds", "120"],
                          capture_output=True, text=True, timeout=300, check=False)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == [] and result["wrong"] == 0, result
    assert result["calls"] == CALLS and result["load_calls"] > 0
    assert result["server_exit"] == 0 and result["leftovers"] == []
    assert done.returncode == 0, done.stderr
