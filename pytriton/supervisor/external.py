"""Model instances hosted outside the server: threads in a user's process that bound a Python callable.

The server cannot start or restart them; it creates their links, waits for them to say hello, and
watches their process: if it disappears, the instances are dropped (their requests fail) and the
segments of that process are removed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.arena import pid_alive, unlink_segments
from pytriton.proxy.router import ProxyRouter, WorkerLink
from pytriton.supervisor.worker_pool import WorkerInstance

logger = logging.getLogger("pytriton.supervisor")

LIVENESS_PERIOD_S = 1.0


class ExternalInstances:
    """The instances of one model that another process hosts (same interface as WorkerPool)."""

    def __init__(
        self,
        router: ProxyRouter,
        config: TritonModelConfig,
        generation: int,
        on_ready: Callable[[WorkerLink], None],
        on_lost: Callable[[WorkerLink], None],
    ):
        self.router = router
        self.config = config
        self.generation = generation
        self.on_ready = on_ready
        self.on_lost = on_lost
        self.instances = [WorkerInstance(i, dev) for i, dev in enumerate(config.instance_devices())]
        self._watcher: asyncio.Task | None = None

    def identity(self, instance: WorkerInstance) -> str:
        return f"{self.config.model_name}#{instance.index}#x{self.generation}"

    def start(self) -> list[str]:
        """Create the links the hosting threads connect to; return their identities."""
        identities = []
        for instance in self.instances:
            identity = self.identity(instance)
            instance.link = self.router.add_link(identity.encode(), f"{self.config.model_name}_0_{instance.index}")
            identities.append(identity)
        self._watcher = asyncio.ensure_future(self._watch())
        return identities

    async def wait_ready(self, timeout_s: float) -> None:
        """Wait until every hosting thread said hello; raise TimeoutError or the worker's error."""
        links = [i.link for i in self.instances if i.link is not None]
        await asyncio.wait_for(asyncio.gather(*(link.hello for link in links)), timeout_s)

    async def _watch(self) -> None:
        pending = {id(i): i for i in self.instances}
        while True:
            await asyncio.sleep(LIVENESS_PERIOD_S if not pending else 0.05)
            for instance in self.instances:
                link = instance.link
                if link is None or link.closed:
                    continue
                if id(instance) in pending and link.hello.done() and link.hello.exception() is None:
                    del pending[id(instance)]
                    self.on_ready(link)
                if link.pid is not None and not pid_alive(link.pid):
                    logger.error("process %d hosting model instance '%s' is gone", link.pid, link.label)
                    self.on_lost(link)
                    self.router.drop_link(
                        link, f"the process hosting model instance '{link.label}' (pid {link.pid}) is gone"
                    )
                    unlink_segments(self.router.tag, link.pid)

    async def stop(self, timeout_s: float = 10.0) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        for instance in self.instances:
            link = instance.link
            if link is not None and not link.closed:
                self.on_lost(link)
                self.router.stop_worker(link)
                self.router.drop_link(link, f"model instance '{link.label}' was unloaded")
