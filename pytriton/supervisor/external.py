"""Model instances hosted outside the server: threads in a user's process that bound a Python callable.

The server cannot start or restart them; it creates their links, waits for them to say hello, and
watches their process: if it disappears, the instances are dropped (their requests fail) and the
segments of that process are removed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.arena import pid_alive, unlink_segments
from pytriton.proxy.router import ProxyRouter, WorkerLink
from pytriton.supervisor.worker_pool import InstanceRoster, WorkerInstance

logger = logging.getLogger("pytriton.supervisor")

LIVENESS_PERIOD_S = 1.0


class ExternalInstances(InstanceRoster):
    """The instances of one model that another process hosts: an instance source, like WorkerPool.

    `identities()` creates the links the hosting threads connect to (the hosting process needs them before the
    instances can exist); `start` then waits for them. A hosted thread cannot be killed: an instance whose
    execution outlived the execution timeout is withheld from the scheduler until its worker answers again.
    """

    def __init__(self, router: ProxyRouter, config: TritonModelConfig, generation: int, ready_timeout_s: float = 300.0):
        super().__init__(router, config)
        self.generation = generation
        self.ready_timeout_s = ready_timeout_s
        self._watcher: asyncio.Task[Any] | None = None
        self._stuck: set[int] = set()  # indexes of instances withheld after an execution timeout
        self._waiting = {instance.index for instance in self.instances}  # not yet connected

    def _serve_hosted(self, instance: WorkerInstance) -> None:
        assert instance.link is not None
        self._serve(instance, instance.link, kill=lambda reason: self._withhold(instance))

    def _withhold(self, instance: WorkerInstance) -> None:
        logger.error("model instance '%s' runs in another process and cannot be killed; it gets no work until its "
                     "stuck execution returns", instance.link.label if instance.link else instance.index)
        self._stuck.add(instance.index)
        instance.serving = None  # the scheduler already dropped it

    def identity(self, instance: WorkerInstance) -> str:
        return f"{self.config.model_name}#{instance.index}#x{self.generation}"

    def identities(self) -> list[str]:
        """Create the links the hosting threads connect to; return their identities."""
        identities = []
        for instance in self.instances:
            identity = self.identity(instance)
            instance.link = self.router.add_link(identity.encode(), self._label(instance))
            identities.append(identity)
        self._watcher = asyncio.ensure_future(self._watch())
        return identities

    async def start(self) -> None:
        """Wait until every hosting thread said hello; raise TimeoutError or the worker's error."""
        links = [i.link for i in self.instances if i.link is not None]
        await asyncio.wait_for(asyncio.gather(*(link.hello for link in links)), self.ready_timeout_s)
        self._serve_connected()

    def _serve_connected(self) -> None:
        for instance in self.instances:
            link = instance.link
            if instance.index in self._waiting and link is not None and link.hello.done() \
                    and link.hello.exception() is None:
                self._waiting.discard(instance.index)
                self._serve_hosted(instance)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(LIVENESS_PERIOD_S if not self._waiting else 0.05)
            self._serve_connected()
            for instance in self.instances:
                link = instance.link
                if link is None or link.closed:
                    continue
                if instance.index in self._stuck and not link.pending:  # its stuck execution has returned
                    self._stuck.discard(instance.index)
                    self._serve_hosted(instance)
                process_gone = link.pid is not None and not pid_alive(link.pid)
                if process_gone:
                    self._lost(instance, link, f"the process hosting model instance '{link.label}' (pid {link.pid}) "
                                               "is gone")
                    unlink_segments(self.router.tag, link.pid)  # (its other threads' segments too: all are gone)
                elif link.unreachable:  # the thread closed its own segments as it ended
                    self._lost(instance, link, f"the thread hosting model instance '{link.label}' in process "
                                               f"{link.pid} is gone")

    def _fatal_reason(self, link: WorkerLink, error: str) -> str:
        return f"the thread hosting model instance '{link.label}' in process {link.pid} is gone ({error})"

    def _lost(self, instance: WorkerInstance, link: WorkerLink, reason: str) -> None:
        """A hosting thread stopped serving (it said so, or it is found gone): nothing can bring it back."""
        super()._lost(instance, link, reason)
        self._stuck.discard(instance.index)
        if self.handler is not None and all(i.link is None or i.link.closed for i in self.instances):
            # Nothing can bring the instances back: who waits, and who comes later, fails now.
            self.handler.set_unavailable(f"model '{self.config.model_name}' is not available: {reason}")

    async def stop(self, timeout_s: float = 10.0) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        for instance in self.instances:
            link = instance.link
            if link is not None and not link.closed:
                self._unserve(instance)
                self.router.stop_worker(link)
                self.router.drop_link(link, f"model instance '{link.label}' was unloaded")
