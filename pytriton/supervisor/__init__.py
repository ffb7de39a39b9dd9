"""Spawning, watching and restarting worker processes."""

from pytriton.supervisor.worker_pool import WorkerPool, WorkerStartError

__all__ = ["WorkerPool", "WorkerStartError"]
