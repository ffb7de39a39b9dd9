"""Per-model scheduling: queueing requests and handing them to idle instances."""

from pytriton.scheduler.dispatcher import ModelScheduler

__all__ = ["ModelScheduler"]
