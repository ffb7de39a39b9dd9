"""Inference callables of tests/e2e/test_frontend_processes.py."""

from __future__ import annotations

import os

import numpy as np


def _front_end_pid() -> int:
    """The server (front-end) process that owns this worker: its parent, or the parent of the worker template it was
    forked from (`python -m pytriton.backends.template`, itself a child of the front-end process)."""
    parent = os.getppid()
    with open(f"/proc/{parent}/cmdline", "rb") as cmdline:
        if b"pytriton.backends.template" not in cmdline.read().split(b"\0"):
            return parent
    with open(f"/proc/{parent}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def server_pid(requests):
    """OUT = IN, and SERVER = the pid of the server (front-end) process whose worker ran it (INT64 [1])."""
    return [{"OUT": r["IN"], "SERVER": np.array([_front_end_pid()], dtype=np.int64)} for r in requests]
