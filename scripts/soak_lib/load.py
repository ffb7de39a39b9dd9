"""The soak's client processes (spawned), the tallies they report, and the server's pending-request drain."""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import time
from collections.abc import Callable, Sequence
from typing import Any

from soak_lib.clients import run_clients
from soak_lib.server import SoakServer
from soak_lib.tally import Tally


class Load:
    """The client processes, and the latest tally each has reported."""

    def __init__(self, specs: Sequence[Any], target: Callable[[Any, Any, Any], None] = run_clients) -> None:
        """specs: one per client process (an `index` each), each run by target(spec, stop event, queue)."""
        ctx = mp.get_context("spawn")
        self.stop = ctx.Event()
        self.queue: Any = ctx.Queue()
        self.procs = [ctx.Process(target=target, args=(s, self.stop, self.queue), daemon=True,
                                  name=f"soak-client-{s.index}") for s in specs]
        self.latest: dict[int, Tally] = {}
        self.finished: set[int] = set()

    def start(self) -> None:
        for proc in self.procs:
            proc.start()

    def drain(self, wait_s: float = 0.0) -> None:
        """Take the reports that arrived (waiting up to wait_s for the first one)."""
        timeout = max(0.0, wait_s)
        while True:
            try:
                what, index, data = self.queue.get(timeout=timeout) if timeout > 0 else self.queue.get_nowait()
            except queue_mod.Empty:
                return
            timeout = 0.0
            self.latest[index] = Tally.from_dict(data)
            if what == "final":
                self.finished.add(index)

    def tally(self) -> Tally:
        total = Tally()
        for t in self.latest.values():
            total.merge(t)
        return total

    def all_finished(self) -> bool:
        return len(self.finished) == len(self.procs)

    def finish(self, grace_s: float) -> list[str]:
        """Stop the clients and collect their final reports; kill those not done within grace_s. Returns the
        problems: a client killed, or one that ended without its report."""
        self.stop.set()
        deadline = time.monotonic() + grace_s
        while not self.all_finished() and time.monotonic() < deadline:
            self.drain(wait_s=0.5)
            if all(i in self.finished or not p.is_alive() for i, p in enumerate(self.procs)):
                self.drain(wait_s=1.0)  # what a client sent just before it ended
                break
        problems = []
        for i, proc in enumerate(self.procs):
            proc.join(max(0.0, deadline - time.monotonic()) + 5)
            if proc.is_alive():
                proc.kill()
                proc.join()
                problems.append(f"client process {i} did not finish {grace_s:.0f} s after the stop: killed")
        try:
            self.drain()
        except Exception as e:  # noqa: BLE001 (a client killed while writing its report can leave half of it)
            problems.append(f"client reports unreadable after the kill: {e}")
        problems += [f"client process {i} ended (exit status {p.exitcode}) without its final report"
                     for i, p in enumerate(self.procs) if i not in self.finished and p.exitcode != -9]
        return problems


def drain_pending(server: SoakServer, wait_s: float) -> int | None:
    """The pending gauge once it is 0, or its value after wait_s."""
    deadline = time.monotonic() + wait_s
    pending = server.pending()
    while pending != 0 and time.monotonic() < deadline:
        time.sleep(0.5)
        pending = server.pending()
    return pending
