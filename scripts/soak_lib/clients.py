"""A soak client process: threads with sync tritonclient clients and an event loop with grpc.aio ones, each
sending requests of random kinds until the stop event, its deadline or its request budget; progress and the
final tally go to the soak through a queue as ("progress" | "final", process index, Tally.to_dict()).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import random
import signal
import threading
import time
from typing import Any, Protocol

from soak_lib.requests import AIO_KINDS, ORDINARY_KINDS, SYNC_CANCELLING_KINDS, AioSlot, SyncSlot
from soak_lib.tally import Tally


@dataclasses.dataclass
class KindMix:
    """Which kinds of request a slot sends: of the allowed kinds, cancelling ones with `cancel_share` (thread slots)
    or twice that (aio slots, which have one ordinary and one cancelling kind), the others otherwise."""

    kinds: list[str]
    cancel_share: float

    def _groups(self, ordinary: list[str], cancelling: list[str]) -> tuple[list[str], list[str]]:
        return [k for k in ordinary if k in self.kinds], [k for k in cancelling if k in self.kinds]

    @property
    def has_sync(self) -> bool:
        return any(self._groups(ORDINARY_KINDS, SYNC_CANCELLING_KINDS))

    @property
    def has_aio(self) -> bool:
        return any(self._groups(AIO_KINDS[:1], AIO_KINDS[1:]))

    def _pick(self, rng: random.Random, ordinary: list[str], cancelling: list[str], share: float) -> str:
        ordinary, cancelling = self._groups(ordinary, cancelling)
        if cancelling and (not ordinary or rng.random() < share):
            return rng.choice(cancelling)
        return rng.choice(ordinary)

    def pick_sync(self, rng: random.Random) -> str:
        return self._pick(rng, ORDINARY_KINDS, SYNC_CANCELLING_KINDS, self.cancel_share)

    def pick_aio(self, rng: random.Random) -> str:
        return self._pick(rng, AIO_KINDS[:1], AIO_KINDS[1:], min(1.0, 2 * self.cancel_share))


@dataclasses.dataclass
class ClientSpec:
    index: int
    grpc_url: str
    http_url: str
    sync_slots: int  # threads, one request in flight each
    aio_slots: int  # concurrent tasks in the event loop
    mix: KindMix
    timeout_s: float  # of an ordinary request; one that takes longer is an error
    deadline: float  # time.time() after which no request starts
    max_requests: int  # this process's share of the request bound
    region_prefix: str  # of this process's shared-memory keys and region names
    seed: int
    progress_s: float = 5.0


class Bounded(Protocol):
    deadline: float  # time.time() after which no request starts
    max_requests: int


class Budget:
    """Whether a slot may start another request: not stopped, before the deadline, within the count."""

    def __init__(self, spec: Bounded, stop: Any) -> None:
        self._stop, self._deadline, self._max = stop, spec.deadline, spec.max_requests
        self._taken = itertools.count()

    def take(self) -> bool:
        return not self._stop.is_set() and time.time() < self._deadline and next(self._taken) < self._max


class SlotTally:
    """One slot's tally, read by the progress reports while the slot writes it."""

    def __init__(self) -> None:
        self.tally = Tally()
        self.lock = threading.Lock()

    def ok(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.tally.kind(kind).record_ok(seconds)

    def cancelled(self, kind: str) -> None:
        with self.lock:
            self.tally.kind(kind).cancelled += 1

    def failure(self, kind: str, exc: BaseException) -> None:
        with self.lock:
            self.tally.kind(kind).record_failure(kind, f"{type(exc).__name__}: {exc}")


def _count(out: SlotTally, kind: str, outcome: str, t0: float) -> None:
    if outcome == "ok":
        out.ok(kind, time.perf_counter() - t0)
    else:
        out.cancelled(kind)


def sync_slot(spec: ClientSpec, index: int, budget: Budget, out: SlotTally) -> None:
    rng = random.Random(spec.seed * 1000 + index)
    try:
        slot = SyncSlot(spec.grpc_url, spec.http_url, f"{spec.region_prefix}{index}_", index, spec.timeout_s, rng)
    except Exception as e:  # noqa: BLE001 (counted: the soak reports it)
        out.failure("setup", e)
        return
    try:
        while budget.take():
            kind = spec.mix.pick_sync(rng)
            t0 = time.perf_counter()
            try:
                _count(out, kind, slot.send(kind), t0)
            except Exception as e:  # noqa: BLE001 (every failure is counted by class)
                out.failure(kind, e)
    finally:
        for error in slot.close():
            out.failure("shm-unregister", RuntimeError(error))


async def aio_slots(spec: ClientSpec, budget: Budget, outs: list[SlotTally]) -> None:
    import tritonclient.grpc.aio as aiogrpcclient

    from soak_lib.requests import GRPC_CHANNEL_ARGS

    async def one(slot: AioSlot, rng: random.Random, out: SlotTally) -> None:
        while budget.take():
            kind = spec.mix.pick_aio(rng)
            t0 = time.perf_counter()
            try:
                _count(out, kind, await slot.send(kind), t0)
            except Exception as e:  # noqa: BLE001 (every failure is counted by class)
                out.failure(kind, e)

    client = aiogrpcclient.InferenceServerClient(spec.grpc_url, channel_args=GRPC_CHANNEL_ARGS)
    try:
        tasks = []
        for i, out in enumerate(outs):
            rng = random.Random(spec.seed * 1000 + 500 + i)
            tasks.append(one(AioSlot(client, 500 + i, spec.timeout_s, rng), rng, out))
        await asyncio.gather(*tasks)
    finally:
        await client.close()


def _run_aio(spec: ClientSpec, budget: Budget, outs: list[SlotTally]) -> None:
    try:
        asyncio.run(aio_slots(spec, budget, outs))
    except Exception as e:  # noqa: BLE001 (counted: the soak reports it)
        outs[0].failure("setup", e)


def _merged(outs: list[SlotTally]) -> dict[str, Any]:
    total = Tally()
    for out in outs:
        with out.lock:
            total.merge(out.tally)
    return total.to_dict()


def run_clients(spec: ClientSpec, stop: Any, queue: Any) -> None:
    """The client process's main: runs the slots, reports progress, then the final tally."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the soak's to handle: it sets `stop`
    budget = Budget(spec, stop)
    sync_outs = [SlotTally() for _ in range(spec.sync_slots)]
    aio_outs = [SlotTally() for _ in range(spec.aio_slots)]
    threads = [threading.Thread(target=sync_slot, args=(spec, i, budget, out), daemon=True)
               for i, out in enumerate(sync_outs)]
    if aio_outs:
        threads.append(threading.Thread(target=_run_aio, args=(spec, budget, aio_outs), daemon=True))
    for t in threads:
        t.start()
    outs = sync_outs + aio_outs
    while True:
        next_report = time.monotonic() + spec.progress_s
        for t in threads:
            t.join(max(0.0, next_report - time.monotonic()))
        if not any(t.is_alive() for t in threads):
            break
        queue.put(("progress", spec.index, _merged(outs)))
    queue.put(("final", spec.index, _merged(outs)))
