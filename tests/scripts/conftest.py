"""Makes the scripts' libraries (`scripts/bench_lib`) importable; recorded perf_analyzer output in data/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests._support.paths import SCRIPTS

if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def data() -> Path:
    """Recorded from `scripts/bench --quick`: perf_analyzer's CSV and console output of one run, results.json."""
    return DATA
