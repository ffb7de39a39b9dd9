"""One lock per model name for the repository's loads and unloads: those of one model run one at a time, while other
models load and unload meanwhile (as Triton: a model whose initialize blocks holds up no other model's load). A name's
lock lives while someone holds or waits for it, so names a client made up cost nothing once their load ended."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator


class NameLocks:
    """The locks by model name: `async with locks(name)`, or `locks.hold(name, timeout_s)`."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # name -> (its lock, [holders and waiters])

    def __call__(self, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        return self._held(name, None)

    def hold(self, name: str, timeout_s: float) -> contextlib.AbstractAsyncContextManager[None]:
        """The lock of `name`, waiting `timeout_s` at most (asyncio.TimeoutError): for a load made on behalf of another
        one that holds its own lock (an ensemble's step), so that two such loads waiting on each other end."""
        return self._held(name, timeout_s)

    def __len__(self) -> int:
        """Names whose lock is held or waited for."""
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def _held(self, name: str, timeout_s: float | None) -> AsyncIterator[None]:
        entry = self._locks.get(name)
        if entry is None:
            entry = self._locks[name] = (asyncio.Lock(), [0])
        lock, users = entry
        users[0] += 1
        try:
            if timeout_s is None:
                await lock.acquire()
            else:
                await asyncio.wait_for(lock.acquire(), timeout_s)
            try:
                yield
            finally:
                lock.release()
        finally:
            users[0] -= 1
            if users[0] == 0 and self._locks.get(name) is entry:
                del self._locks[name]

    async def idle(self, timeout_s: float) -> bool:
        """Wait until no lock is held (`timeout_s` at most, in all); whether none is."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for lock, _ in list(self._locks.values()):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return not any(lock.locked() for lock, _ in self._locks.values())
            try:
                await asyncio.wait_for(lock.acquire(), remaining)
            except asyncio.TimeoutError:
                return False
            lock.release()
        return True


__all__ = ["NameLocks"]
