"""One lock per model name for the repository's loads and unloads: those of one model run one at a time, while other
models load and unload meanwhile (as Triton: a model whose initialize blocks holds up no other model's load)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator


class NameLocks:
    """The locks by model name (made on first use)."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def __call__(self, name: str) -> asyncio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        return lock

    @contextlib.asynccontextmanager
    async def hold(self, name: str, timeout_s: float) -> AsyncIterator[None]:
        """The lock of `name`, waiting `timeout_s` at most (asyncio.TimeoutError): for a load made on behalf of another
        one that holds its own lock (an ensemble's step), so that two such loads waiting on each other end."""
        lock = self(name)
        await asyncio.wait_for(lock.acquire(), timeout_s)
        try:
            yield
        finally:
            lock.release()

    async def idle(self, timeout_s: float) -> bool:
        """Wait until no lock is held (`timeout_s` at most, in all); whether none is."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for lock in list(self._locks.values()):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return not any(lock.locked() for lock in self._locks.values())
            try:
                await asyncio.wait_for(lock.acquire(), remaining)
            except asyncio.TimeoutError:
                return False
            lock.release()
        return True


__all__ = ["NameLocks"]
