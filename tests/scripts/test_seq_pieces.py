"""scripts/bench_lib/seq_pieces.py runs each of its pieces on this tree (one run each: a smoke test of the probe)."""

from __future__ import annotations

import re

import pytest
from bench_lib import seq_pieces

pytest.importorskip("tritonclient.grpc")


def test_every_piece_measures_something(monkeypatch, capsys):
    monkeypatch.setattr(seq_pieces, "_best", lambda run, runs=7: run())
    seq_pieces.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("pytriton from ") and len(lines) == 4
    for line in lines[1:]:
        figures = [float(value) for value in re.findall(r"(\d+\.\d+) us", line)]
        assert figures and all(value > 0 for value in figures), line
