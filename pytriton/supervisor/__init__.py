"""Spawning, watching and restarting worker processes.

The names below load on first use: the user's process behind `Triton.bind` needs only `run_dir`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytriton.utils.lazy import lazy_names

if TYPE_CHECKING:
    from pytriton.supervisor.worker_pool import WorkerPool, WorkerStartError

_WHERE = {"WorkerPool": "pytriton.supervisor.worker_pool", "WorkerStartError": "pytriton.supervisor.worker_pool"}

__getattr__ = lazy_names(__name__, _WHERE)

__all__ = ["WorkerPool", "WorkerStartError"]
