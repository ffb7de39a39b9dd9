"""The memory that request bodies may hold on one HTTP/1.1 port, all connections together
(`HttpLimits.max_buffered_bytes`).

Without it each connection is bounded (a body grows with the bytes that arrive, up to `max_input_bytes`) but their
sum is not: a storm of clients that send a 1 MiB body and hang up made the server read hundreds of bodies into
memory before it saw their ends. Connections charge the budget for what their bodies hold (bodies being received,
requests read and waiting in the pipeline queue, a request while its handler runs, the spare buffer kept for the
next same-sized body) and give it back when they let go. When a body would grow past the budget the connection stops
reading (`transport.pause_reading()`): its upload stalls in the kernel and the client's TCP window until memory
frees. Waiters resume in the order they came (first in, first out), each with its whole remaining body reserved,
so a resumed body never waits again.

No deadlock: bodies of waiting connections cannot shrink, so when everything charged is held by waiting connections
(nothing else will ever give memory back), the first waiter gets its reservation past the limit. Only one such
overdraft exists at a time (the next needs everything outside waiting bodies released again), so the memory held is
at most the limit, plus one body (`max_input_bytes`), plus the few KiB a read may bring per connection before it
pauses (`TIGHT_READ`; bytes already read have to be kept).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Protocol

logger = logging.getLogger("pytriton.frontend")

# A read brings at most this many bytes while memory is tight (a head, or the start of a body, before the
# connection knows it has to wait): what a paused connection can hold past the budget.
TIGHT_READ = 4 * 1024
# Reads are full-sized (the shared 64 KiB buffer) while at least this much is free and nobody waits.
ROOMY = 64 * 1024
LOG_EVERY_S = 5.0


class BudgetClient(Protocol):
    """What the budget needs of a connection (`RequestReader`)."""

    def budget_granted(self) -> None:
        """The memory waited for is charged: read on."""

    def give_up_spare(self) -> int:
        """Drop the spare body buffer (someone waits for memory); returns what it was charged."""


class BufferBudget:
    """Bytes of request bodies held by the connections of one port, against a limit; FIFO waiters."""

    __slots__ = ("_last_log", "_spares", "_stuck", "_waiters", "_waits_logged", "limit", "name", "peak", "roomy",
                 "used", "waits")

    def __init__(self, limit: int, name: str = "HTTP"):
        self.limit = limit
        self.name = name  # the port, in log lines
        self.used = 0  # bytes charged
        self.peak = 0  # the most charged at once
        self.waits = 0  # how often a connection had to wait
        self.roomy = True  # nobody waits and a full read fits: connections read full-sized reads
        self._waiters: OrderedDict[BudgetClient, tuple[int, int]] = OrderedDict()  # -> (need, body held meanwhile)
        self._stuck = 0  # bytes held by bodies of waiting connections: released only when one of them goes on
        self._spares: set[BudgetClient] = set()  # connections whose spare buffer is charged
        self._last_log = 0.0
        self._waits_logged = 0

    @property
    def waiting(self) -> int:
        """Connections that wait for memory."""
        return len(self._waiters)

    @property
    def tight(self) -> bool:
        """Someone waits, or the limit is passed: bytes a connection took may not be followed by more."""
        return bool(self._waiters) or self.used > self.limit

    def _update(self) -> None:
        used = self.used
        self.peak = max(self.peak, used)
        self.roomy = not self._waiters and self.limit - used >= ROOMY

    def charge(self, nbytes: int) -> None:
        """Bytes already taken (read from the socket): charged even past the limit."""
        self.used += nbytes
        self._update()

    def try_take(self, nbytes: int) -> bool:
        """Charge `nbytes` if nobody waits and they fit."""
        if self._waiters or self.used + nbytes > self.limit:
            return False
        self.used += nbytes
        self._update()
        return True

    def release(self, nbytes: int) -> None:
        self.used -= nbytes
        if self._waiters:
            self._wake()
        else:
            self._update()

    def wait(self, client: BudgetClient, need: int, held: int) -> bool:
        """`client` (whose current body holds `held` bytes) needs `need` more: True when charged at once, else it
        is queued and `client.budget_granted()` is called once they are charged."""
        if self.try_take(need):
            return True
        self.waits += 1
        self._waiters[client] = (need, held)
        self._stuck += held
        for spare in self._spares:  # kept for speed only: memory is wanted now
            self.used -= spare.give_up_spare()
        self._spares.clear()
        self._log()
        self._wake(client)
        return client not in self._waiters

    def leave(self, client: BudgetClient) -> None:
        """`client` waits no more (its connection ends); what it holds it releases itself."""
        entry = self._waiters.pop(client, None)
        if entry is not None:
            self._stuck -= entry[1]
            self._wake()

    def keep_spare(self, client: BudgetClient) -> bool:
        """May `client` keep a spare buffer (still charged)? Not while anyone waits for memory."""
        if self._waiters:
            return False
        self._spares.add(client)
        return True

    def spare_taken(self, client: BudgetClient) -> None:
        """`client`'s spare buffer is used again or dropped by the client itself (its charge moves or is released)."""
        self._spares.discard(client)

    def _wake(self, caller: BudgetClient | None = None) -> None:
        """Grant waiters in order while their need fits, or the first one past the limit when nothing but waiting
        bodies holds memory (else they would wait for each other for ever)."""
        waiters = self._waiters
        while waiters:
            client, (need, held) = next(iter(waiters.items()))
            if self.used + need > self.limit and self.used > self._stuck:
                break
            waiters.popitem(last=False)
            self._stuck -= held
            self.used += need
            if client is not caller:
                client.budget_granted()
        self._update()

    def _log(self) -> None:
        if not logger.isEnabledFor(logging.DEBUG):
            return
        now = time.monotonic()
        if now - self._last_log < LOG_EVERY_S:
            return
        logger.debug("%s: request bodies hold %d bytes (limit %d, peak %d); %d connections wait for memory, "
                     "%d waits since the last report", self.name, self.used, self.limit, self.peak,
                     len(self._waiters), self.waits - self._waits_logged)
        self._last_log, self._waits_logged = now, self.waits
