"""Where things are: the repository root (the working directory of the servers the tests start)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REPOSITORIES = REPO / "tests" / "repositories"
"""The model repositories the tests serve (tests/repositories/<name>)."""
SCRIPTS = REPO / "scripts"
"""The maintainer scripts (`scripts/bench_lib` is imported by tests/scripts)."""
