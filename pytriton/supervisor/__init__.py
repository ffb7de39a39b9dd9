"""Spawning, watching and restarting worker processes.

The names below load on first use: the user's process behind `Triton.bind` needs only `run_dir`."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytriton.supervisor.worker_pool import WorkerPool, WorkerStartError

_WHERE = {"WorkerPool": "pytriton.supervisor.worker_pool", "WorkerStartError": "pytriton.supervisor.worker_pool"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)


__all__ = ["WorkerPool", "WorkerStartError"]
