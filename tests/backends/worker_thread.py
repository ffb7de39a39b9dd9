"""The worker loop served in a thread of the test's process against a real router (as `Triton.bind` hosts it), and a
router Call that keeps the replies (tests/backends/test_worker_loop.py, test_sequence_rows.py)."""

from __future__ import annotations

import asyncio
import os
import secrets
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from pytriton.backends import worker
from pytriton.backends.spec import WorkerSpec
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.arena import our_segments
from pytriton.proxy.router import ProxyRouter, WorkerGoneError, WorkerLink, response_slots
from tests._support.waits import woken_until


class Replies:
    """A router Call that keeps every RESULT of one call (their response slots go back at once)."""

    def __init__(self, link: WorkerLink):
        self.link = link
        self.values: list[int] = []
        self.errors: list[str] = []
        self.final = asyncio.get_running_loop().create_future()
        self.gone: str | None = None
        self._came = asyncio.Event()  # set at each reply (on the router's loop)

    def on_reply(self, message: Any, frames: list[Any]) -> None:
        for item in message.responses:
            self.values.append(len(item.outputs))
        if message.error:
            self.errors.append(message.error)
        self.link.release(response_slots(message))
        self._came.set()
        if message.final and not self.final.done():
            self.final.set_result(None)

    def on_gone(self, reason: str) -> None:
        self.gone = reason
        if not self.final.done():
            self.final.set_exception(WorkerGoneError(reason))

    async def until(self, count: int, timeout_s: float = 10.0) -> None:
        """Wait for `count` responses, woken by each reply."""
        await woken_until(self._came, lambda: len(self.values), count, "responses", timeout_s)


def run_worker(config: TritonModelConfig, fn: Callable, scenario: Callable) -> threading.Thread:
    """A router and a thread serving `fn` (stopped with its stop event); runs `scenario(router, link, stop)`."""

    async def main() -> threading.Thread:
        tag = secrets.token_hex(4)
        with tempfile.TemporaryDirectory() as run_dir:
            router = ProxyRouter(f"ipc://{run_dir}/w.sock", tag)
            link = router.add_link(b"m#0#x1", "m_0_0")
            spec = WorkerSpec(address=router.address, identity="m#0#x1", tag=tag, server_pid=os.getpid(),
                              inline_max=router.inline_max, config=config, watch="none")
            stop = threading.Event()
            thread = threading.Thread(target=worker.serve, args=(spec, fn, stop), daemon=True)
            thread.start()
            try:
                await asyncio.wait_for(link.hello, 10)
                await scenario(router, link, stop)
            finally:
                stop.set()
                await asyncio.get_running_loop().run_in_executor(None, thread.join, 10)
                router.close()
            assert list(our_segments(tag)) == []
            return thread

    return asyncio.run(main())
