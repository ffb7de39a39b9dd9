"""A chaos soak client process: threads, each with a ChaosSlot, sending calls of random kinds until the stop event,
the deadline or the request budget; progress and the final tally go to the soak through a queue, as the soak's own
clients do (soak_lib.clients)."""

from __future__ import annotations

import dataclasses
import random
import signal
import threading
import time
from typing import Any

from soak_lib.chaos_requests import ChaosSlot
from soak_lib.chaos_result import AFTER_FRONTEND_KILL
from soak_lib.clients import Budget, SlotTally, _merged

ERROR_PAUSE_S = 0.02  # after an error: a server that is gone is not hammered in a tight loop


@dataclasses.dataclass
class ChaosClientSpec:
    index: int
    grpc_url: str
    http_url: str
    slots: int  # threads, one call in flight each
    kinds: list[str]
    timeout_s: float  # client timeout of an ordinary call: a call without an answer by then is a hang
    deadline: float  # time.time() after which no call starts
    max_requests: int  # this process's share of the request bound
    region_prefix: str  # of this process's shared-memory keys and region names
    seed: int
    progress_s: float = 2.0
    frontend_gone: Any = None  # an Event set once the soak killed a front-end process (errors after it are marked)

    def region_names(self) -> list[str]:
        """The names of the regions this process's slots register (ChaosSlot)."""
        return [f"{self.region_prefix}{i}_{role}" for i in range(self.slots) for role in ("in", "out")]


def chaos_slot(spec: ChaosClientSpec, index: int, budget: Budget, out: SlotTally) -> None:
    rng = random.Random(spec.seed * 1000 + index)
    try:
        slot = ChaosSlot(spec.grpc_url, spec.http_url, f"{spec.region_prefix}{index}_", index, spec.timeout_s, rng)
    except Exception as e:  # noqa: BLE001 (counted: the soak reports it)
        out.failure("setup", e)
        return
    try:
        while budget.take():
            failed = False
            for outcome in slot.send_checked(rng.choice(spec.kinds)):
                if outcome.result == "ok":
                    out.ok(outcome.kind, outcome.seconds)
                elif outcome.result == "cancelled":
                    out.cancelled(outcome.kind)
                else:
                    assert isinstance(outcome.result, BaseException)
                    if spec.frontend_gone is not None and spec.frontend_gone.is_set():
                        with out.lock:
                            out.tally.kind(outcome.kind).record_failure(
                                outcome.kind, f"{AFTER_FRONTEND_KILL}{type(outcome.result).__name__}: {outcome.result}")
                    else:
                        out.failure(outcome.kind, outcome.result)
                    failed = True
            if failed:
                time.sleep(ERROR_PAUSE_S)
    finally:
        marker = AFTER_FRONTEND_KILL if spec.frontend_gone is not None and spec.frontend_gone.is_set() else ""
        for error in slot.close():
            with out.lock:
                out.tally.kind("shm-unregister").record_failure("shm-unregister", f"{marker}RuntimeError: {error}")


def run_chaos_clients(spec: ChaosClientSpec, stop: Any, queue: Any) -> None:
    """The client process's main: runs the slots, reports progress, then the final tally."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the soak's to handle: it sets `stop`
    budget = Budget(spec, stop)
    outs = [SlotTally() for _ in range(spec.slots)]
    threads = [threading.Thread(target=chaos_slot, args=(spec, i, budget, out), daemon=True)
               for i, out in enumerate(outs)]
    for t in threads:
        t.start()
    while True:
        next_report = time.monotonic() + spec.progress_s
        for t in threads:
            t.join(max(0.0, next_report - time.monotonic()))
        if not any(t.is_alive() for t in threads):
            break
        queue.put(("progress", spec.index, _merged(outs)))
    queue.put(("final", spec.index, _merged(outs)))
