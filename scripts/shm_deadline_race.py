"""A client whose call hits its deadline and at once sends its next call into the same shared-memory output region
must read its own answer there, never the dropped call's late one (issue 40, "A wrong answer").

Starts `pytriton serve examples.add_sub:double` (y = 2x, FP32, max batch 64, 2 instances by default) on free loopback
ports (or uses --url), then runs:

- racers (3): each with its own gRPC channel and its own system shared-memory regions (input and output, registered
  over gRPC): a call with a short deadline (--deadline-ms, default 1-5 ms), then at once a normal call (the follow-up)
  on the same regions with new values. Every value of the output region is checked after each answer (the deadline
  call's too when it was answered in time), and again right before the racer's next round (a dropped call's write
  that lands after the answer was read shows there);
- load (3): plain gRPC calls with the tensors in the request, every value checked.

Bounded by --calls (follow-up calls in all) and --max-seconds. Prints one JSON line (follow-up calls, how many came
right after a deadline, wrong answers and their kinds, elapsed seconds, what the server left behind) and exits 1 when
any answer was wrong or a call failed, 0 otherwise. The deadline range that cuts calls depends on the machine: on a
fast idle one 1-5 ms cuts few of them (`after_deadline` says how many were); 0.2-1 ms cuts about half.

    .venv/bin/python scripts/shm_deadline_race.py --calls 100000 --deadline-ms 0.2,1
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import sys
import tempfile
import threading
import time
from typing import Any

if __package__ in (None, ""):  # run as a file: import the packages from scripts/
    _HERE = pathlib.Path(__file__).resolve().parent
    if str(_HERE) not in sys.path:
        sys.path.insert(0, str(_HERE))

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from soak_lib.requests import GRPC_CHANNEL_ARGS
from soak_lib.server import SoakServer
from tritonclient.utils import InferenceServerException

MODEL = "double"
ORDINARY_TIMEOUT_S = 30.0


class Tally:
    """What all threads counted (under one lock)."""

    def __init__(self, calls: int, stop_at: float) -> None:
        self.lock = threading.Lock()
        self.calls = calls  # follow-up calls to make in all
        self.stop_at = stop_at
        self.follow_ups = 0
        self.after_deadline = 0  # follow-ups whose deadline call was cut by its deadline
        self.deadline_answered = 0  # deadline calls answered in time (their region checked too)
        self.wrong: list[str] = []
        self.stale = 0  # wrong answers that are the dropped call's values
        self.late = 0  # regions overwritten after the follow-up's answer was read (counted in `wrong` too)
        self.errors: list[str] = []
        self.load_calls = 0
        self.stop = threading.Event()

    def take(self) -> bool:
        """Whether a racer may start one more round."""
        with self.lock:
            if self.stop.is_set() or self.follow_ups >= self.calls or time.monotonic() >= self.stop_at:
                self.stop.set()
                return False
            self.follow_ups += 1
            return True

    def error(self, text: str) -> None:
        with self.lock:
            if len(self.errors) < 20:
                self.errors.append(text)
            self.stop.set()


class Values:
    """Inputs that differ from each call to the next (exact in float32, and so is 2x)."""

    def __init__(self, seed: int, size: int) -> None:
        self.base = np.arange(size, dtype=np.float32).reshape(1, size)
        self.n = seed * 100_000

    def next(self) -> np.ndarray:
        self.n = (self.n + 1) % 4_000_000
        return self.base + np.float32(self.n * 4)


def _racer(url: str, index: int, size: int, tally: Tally, seed: int, deadline_ms: tuple[float, float],
           think_s: float) -> None:
    rng = random.Random(seed)
    values = Values(index + 1, size)
    client = grpcclient.InferenceServerClient(url, channel_args=GRPC_CHANNEL_ARGS)
    nbytes = size * 4
    names = {role: f"race_{os.getpid()}_{index}_{role}" for role in ("in", "out")}
    handles: dict[str, Any] = {}
    try:
        for role, name in names.items():
            handles[role] = shm.create_shared_memory_region(name, "/" + name, nbytes)
            client.register_system_shared_memory(name, "/" + name, nbytes)

        def call(x: np.ndarray, timeout_s: float) -> np.ndarray:
            shm.set_shared_memory_region(handles["in"], [x])
            inp = grpcclient.InferInput("INPUT", list(x.shape), "FP32")
            inp.set_shared_memory(names["in"], nbytes)
            out = grpcclient.InferRequestedOutput("OUTPUT")
            out.set_shared_memory(names["out"], nbytes)
            client.infer(MODEL, [inp], outputs=[out], client_timeout=timeout_s)
            return np.array(shm.get_contents_as_numpy(handles["out"], np.float32, list(x.shape)))

        last: np.ndarray | None = None  # the last follow-up's input: its answer must still be in the region
        while tally.take():
            if last is not None:
                _recheck(tally, index, handles["out"], last, think_s)
            first = values.next()
            cut = False
            try:
                got = call(first, rng.uniform(*deadline_ms) / 1000)
            except InferenceServerException as exc:
                if "deadline" not in str(exc).lower():
                    tally.error(f"racer {index}: deadline call: {exc}")
                    return
                cut = True
            else:
                with tally.lock:
                    tally.deadline_answered += 1
                if not np.array_equal(got, first * 2):
                    with tally.lock:
                        tally.wrong.append(f"racer {index}: deadline call answered in time, region holds other values")
            second = values.next()
            try:
                got = call(second, ORDINARY_TIMEOUT_S)
            except InferenceServerException as exc:
                tally.error(f"racer {index}: follow-up call: {exc}")
                return
            with tally.lock:
                tally.after_deadline += cut
            last = second
            if not np.array_equal(got, second * 2):
                bad = int(np.count_nonzero(got != second * 2))
                stale = np.array_equal(got, first * 2)
                with tally.lock:
                    tally.stale += stale
                    tally.wrong.append(f"racer {index}: follow-up #{tally.follow_ups}: {bad} of {size} values wrong"
                                       + (" (2x the dropped call's input)" if stale else "")
                                       + ("" if cut else " (the call before was answered in time)"))
        if last is not None:
            _recheck(tally, index, handles["out"], last, think_s)
    except Exception as exc:  # noqa: BLE001 - reported as the run's error
        tally.error(f"racer {index}: {type(exc).__name__}: {exc}")
    finally:
        for name in names.values():
            try:
                client.unregister_system_shared_memory(name)
            except Exception:  # noqa: BLE001 - the region is removed all the same
                pass
        for handle in handles.values():
            shm.destroy_shared_memory_region(handle)
        client.close()


def _recheck(tally: Tally, index: int, handle: Any, x: np.ndarray, think_s: float) -> None:
    """Before the racer writes again: the last follow-up's answer is still what the region holds (a dropped call's
    write that landed after the answer was read would show here)."""
    if think_s:
        time.sleep(think_s)
    now = np.array(shm.get_contents_as_numpy(handle, np.float32, list(x.shape)))
    if not np.array_equal(now, x * 2):
        with tally.lock:
            tally.late += 1
            tally.wrong.append(f"racer {index}: the region changed after the follow-up's answer was read")


def _load(url: str, index: int, size: int, tally: Tally) -> None:
    values = Values(100 + index, size)
    client = grpcclient.InferenceServerClient(url, channel_args=GRPC_CHANNEL_ARGS)
    try:
        while not tally.stop.is_set():
            x = values.next()
            inp = grpcclient.InferInput("INPUT", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            result = client.infer(MODEL, [inp], client_timeout=ORDINARY_TIMEOUT_S)
            if not np.array_equal(result.as_numpy("OUTPUT"), x * 2):
                with tally.lock:
                    tally.wrong.append(f"load {index}: wrong answer")
            with tally.lock:
                tally.load_calls += 1
    except Exception as exc:  # noqa: BLE001
        tally.error(f"load {index}: {type(exc).__name__}: {exc}")
    finally:
        client.close()


def run(url: str, calls: int, racers: int, load: int, size: int, max_seconds: float, seed: int,
        deadline_ms: tuple[float, float] = (1.0, 5.0), think_s: float = 0.0) -> dict[str, Any]:
    """The race against the server at `url`: what was counted, as a dict."""
    started = time.monotonic()
    tally = Tally(calls, started + max_seconds)
    threads = [threading.Thread(target=_racer, args=(url, i, size, tally, seed * 1000 + i, deadline_ms, think_s), daemon=True)
               for i in range(racers)]
    threads += [threading.Thread(target=_load, args=(url, i, size, tally), daemon=True) for i in range(load)]
    for thread in threads:
        thread.start()
    for thread in threads[:racers]:
        thread.join()
    tally.stop.set()
    for thread in threads[racers:]:
        thread.join(ORDINARY_TIMEOUT_S + 5)
    elapsed = time.monotonic() - started
    return {"calls": tally.follow_ups, "after_deadline": tally.after_deadline,
            "deadline_answered": tally.deadline_answered, "wrong": len(tally.wrong), "stale": tally.stale,
            "late": tally.late,
            "load_calls": tally.load_calls, "errors": tally.errors, "seconds": round(elapsed, 1),
            "wrong_examples": tally.wrong[:10]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/shm_deadline_race.py", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--calls", type=int, default=20_000, help="follow-up calls in all (default 20000)")
    p.add_argument("--racers", type=int, default=3, help="clients alternating a deadline call and a normal one")
    p.add_argument("--load", type=int, default=3, help="clients sending plain calls meanwhile")
    p.add_argument("--size", type=int, default=64, help="floats per tensor (default 64)")
    p.add_argument("--instances", type=int, default=2, help="model instances (default 2)")
    p.add_argument("--max-seconds", type=float, default=3600.0, help="stop after this long (default 3600)")
    p.add_argument("--deadline-ms", default="1,5", help="the deadline calls' range in ms, LOW,HIGH (default 1,5)")
    p.add_argument("--think-ms", type=float, default=0.0,
                   help="pause after each follow-up before its region is read again (default 0)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--url", default="", help="gRPC address of a running server serving 'double' (default: start one)")
    p.add_argument("--python", default=sys.executable, help="the interpreter that runs `pytriton serve`")
    args = p.parse_args(argv)
    low, high = (float(v) for v in args.deadline_ms.split(","))
    if args.url:
        result = run(args.url, args.calls, args.racers, args.load, args.size, args.max_seconds, args.seed,
                         (low, high), args.think_ms / 1000)
    else:
        logfile = pathlib.Path(tempfile.mkdtemp(prefix="shm-race-")) / "server.log"
        server = SoakServer(pathlib.Path(args.python), logfile, args.instances, dynamic_batching=False,
                            exit_timeout_s=10.0)
        server.start(timeout_s=120)
        try:
            result = run(server.grpc_url, args.calls, args.racers, args.load, args.size, args.max_seconds, args.seed,
                         (low, high), args.think_ms / 1000)
        finally:
            code, _ = server.stop()
            leftovers = server.leftovers()
        result["server_exit"] = code
        result["leftovers"] = leftovers
        result["server_log"] = str(logfile)
        if code != 0 or leftovers:
            result["errors"].append(f"server exit {code}, leftovers {leftovers}")
    print(json.dumps(result), flush=True)
    return 1 if result["wrong"] or result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
