"""Triton's public Python-backend examples, unchanged, against `pytriton serve --model-repository`, through
scripts/triton-examples (one server per example, the example's own clients; no process or /dev/shm file left).

Slow, and skipped unless PYTRITON_PYTHON_BACKEND_EXAMPLES names a python_backend checkout (or its examples folder):

    git -C /path/to/python_backend archive HEAD examples | tar -x -C /tmp/pb
    PYTRITON_PYTHON_BACKEND_EXAMPLES=/tmp/pb scripts/test-slow tests/e2e/test_triton_examples.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support.paths import REPO

CHECKOUT = os.environ.get("PYTRITON_PYTHON_BACKEND_EXAMPLES")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHECKOUT, reason="PYTRITON_PYTHON_BACKEND_EXAMPLES names no python_backend checkout"),
]


@pytest.mark.parametrize("example", [
    "add_sub", "pytorch", "decoupled", "bls_sync", "bls_async", "bls_decoupled_sync", "bls_decoupled_async",
    "auto_complete", "custom_metrics",
])
def test_example_passes_with_its_own_client(example):
    assert CHECKOUT is not None
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "triton_examples.py"), str(Path(CHECKOUT)),
                             example], capture_output=True, text=True, timeout=600, check=False)
    table = result.stdout
    if f"{example}  SKIP" in table:
        pytest.skip(table.strip().splitlines()[-2])
    assert result.returncode == 0 and f"{example}  PASS" in table, table + result.stderr[-4000:]
