"""Per-model scheduling: queueing requests and handing them to idle instances."""

from pytriton.scheduler.dispatcher import InstanceDispatcher

__all__ = ["InstanceDispatcher"]
