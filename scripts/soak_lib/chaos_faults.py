"""The chaos soak's faults, injected one at a time by a thread of the soak while its clients run:

- `kill-worker`: SIGKILL a worker of the server (any model's, picked at random);
- `kill-ensemble-step`: a `pipeline` request held inside its step `plus_one` or `times_two` (the worker writes its
  pid into a hold file and sleeps), then that worker SIGKILLed: the request must fail, not hang;
- `kill-bls-callee`: a `bls` request held inside its callee `double`, then the callee's worker SIGKILLed;
- `exec-timeout`: a `double` request held past the server's execution timeout: the server must kill the worker and
  fail the request;
- `reload`: a model loaded again over the repository extension (model control explicit), under load;
- `reregister`: one of the clients' regions unregistered and registered again (same key and size) while the
  clients use it and the others;
- `kill-frontend` (with --frontend-processes): a front-end process of the group SIGKILLed, once.

Each fault's outcome is counted by kind; what a fault shows wrong (a held request that hangs, answers a wrong value
or fails with an error nothing explains, a reload that fails, a region that cannot be registered again) is a problem,
and the soak fails on it. Only the server's own processes are signalled (checked by pid and start time).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from soak_lib.chaos_outcomes import HANG, UNEXPLAINED, WRONG, explain
from soak_lib.chaos_repo import EXPECTED, RELOADABLE, TENSORS
from soak_lib.chaos_requests import REGION_BYTES
from soak_lib.requests import GRPC_CHANNEL_ARGS
from soak_lib.server import ServerProcess, SoakServer

FAULT_KINDS = ["kill-worker", "kill-ensemble-step", "kill-bls-callee", "exec-timeout", "reload", "reregister"]
HOLD_S = 60  # a held execution sleeps this long at most (the kill or the execution timeout ends it first)


@dataclasses.dataclass
class FaultLog:
    """Faults by kind and outcome, and the problems they showed (each a reason to fail)."""

    counts: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, kind: str, outcome: str) -> None:
        with self.lock:
            per = self.counts.setdefault(kind, {})
            per[outcome] = per.get(outcome, 0) + 1

    def problem(self, kind: str, text: str) -> None:
        with self.lock:
            if len(self.problems) < 50:
                self.problems.append(f"{kind}: {text}")
            per = self.counts.setdefault(kind, {})
            per["PROBLEM"] = per.get("PROBLEM", 0) + 1

    def injected(self) -> int:
        """Faults that took effect (not those that found nothing to act on)."""
        with self.lock:
            return sum(n for per in self.counts.values() for o, n in per.items() if not o.startswith("skipped"))

    def to_dict(self) -> dict[str, Any]:
        with self.lock:
            return {"counts": {k: dict(v) for k, v in sorted(self.counts.items())}, "problems": list(self.problems)}


@dataclasses.dataclass
class FaultPlan:
    kinds: list[str]
    interval_s: float  # mean time between two faults
    timeout_s: float  # client timeout of a held request (the clients' too)
    exec_timeout_s: float
    hold_dir: pathlib.Path
    regions: list[str]  # the clients' region names (a reregister picks one)
    frontend_kill_at: float | None = None  # with a group: when (time.monotonic()) to kill a front-end process
    hold_s: float = HOLD_S  # how long a held execution sleeps (the kill or the execution timeout ends it first)


class FaultInjector(threading.Thread):
    """Injects the plan's faults, one at a time, from start() until stop() (or the server stops)."""

    def __init__(self, server: SoakServer, plan: FaultPlan, seed: int,
                 before_frontend_kill: Callable[[], None] | None = None) -> None:
        """before_frontend_kill: called right before a front-end process is killed (the clients mark the errors
        they meet from then on)."""
        super().__init__(name="soak-chaos-faults", daemon=True)
        self.server, self.plan = server, plan
        self._before_frontend_kill = before_frontend_kill
        self.rng = random.Random(seed)
        self.log = FaultLog()
        self.frontend_killed = threading.Event()
        self.frontend_kill: dict[str, Any] = {}  # which one, when (for the report)
        self._stop_event = threading.Event()
        self._holds = 0
        self._client: grpcclient.InferenceServerClient | None = None

    def stop(self) -> None:
        self._stop_event.set()

    def inject(self, kind: str) -> None:
        """One fault of this kind now (counted in self.log)."""
        try:
            getattr(self, "_" + kind.replace("-", "_"))()
        except Exception as e:  # noqa: BLE001 (a fault that broke is reported, the others go on)
            self.log.problem(kind, f"the fault itself failed: {type(e).__name__}: {e}")

    @property
    def _grpc(self) -> grpcclient.InferenceServerClient:
        if self._client is None:
            self._client = grpcclient.InferenceServerClient(self.server.grpc_url, channel_args=GRPC_CHANNEL_ARGS)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def run(self) -> None:
        cycle: collections.deque[str] = collections.deque()
        kill_at = self.plan.frontend_kill_at
        try:
            while True:
                wait = self.plan.interval_s * self.rng.uniform(0.5, 1.5)
                if kill_at is not None:
                    wait = max(0.0, min(wait, kill_at - time.monotonic()))
                if self._stop_event.wait(wait):
                    return
                if kill_at is not None and time.monotonic() >= kill_at:
                    self._kill_frontend()
                    return  # the group stops: nothing left to inject into
                if not cycle:
                    cycle.extend(self.rng.sample(self.plan.kinds, len(self.plan.kinds)))
                self.inject(cycle.popleft())
        finally:
            self.close()

    # ------------------------------------------------------------------------------------------ helpers ---
    def _workers(self, model: str | None = None) -> list[ServerProcess]:
        return [p for p in self.server.tree() if p.role == "worker" and (model is None or p.model == model)]

    def _kill(self, process: ServerProcess) -> bool:
        """SIGKILL one of the server's processes, if it is still the one we saw."""
        if not self.server.is_alive(process):
            return False
        try:
            os.kill(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        return True

    def _call(self, model: str, x: np.ndarray, parameters: dict[str, Any]) -> np.ndarray:
        in_name, out_name = TENSORS[model]
        inp = grpcclient.InferInput(in_name, list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        result = self._grpc.infer(model, [inp], parameters=parameters, client_timeout=self.plan.timeout_s)
        return result.as_numpy(out_name)

    # ------------------------------------------------------------------------------------------- faults ---
    def _kill_worker(self) -> None:
        workers = self._workers()
        if not workers:
            self.log.count("kill-worker", "skipped: no worker running")
            return
        victim = self.rng.choice(workers)
        self.log.count("kill-worker", f"killed a worker of {victim.model}" if self._kill(victim)
                       else "skipped: the worker was gone")

    def _kill_ensemble_step(self) -> None:
        self._hold("kill-ensemble-step", "pipeline", self.rng.choice(["plus_one", "times_two"]), kill=True)

    def _kill_bls_callee(self) -> None:
        self._hold("kill-bls-callee", "bls", "double", kill=True)

    def _exec_timeout(self) -> None:
        self._hold("exec-timeout", "double", "double", kill=False)

    def _hold(self, kind: str, model: str, held: str, kill: bool) -> None:
        """A request to `model` held inside `held`; its worker killed (or left to the execution timeout). The
        request must end within the client timeout with an error that the fault explains."""
        self._holds += 1
        name = f"hold-{os.getpid()}-{self._holds}"
        path = self.plan.hold_dir / name
        x = np.arange(8, dtype=np.float32).reshape(1, 8) + np.float32(self._holds % 1000)
        ended: dict[str, Any] = {}

        def request() -> None:
            t0 = time.monotonic()
            try:
                ended["y"] = self._call(model, x, {"hold_model": held, "hold_file": name, "hold_s": str(self.plan.hold_s)})
            except Exception as e:  # noqa: BLE001 (judged below)
                ended["error"] = e
            ended["seconds"] = time.monotonic() - t0

        caller = threading.Thread(target=request, name=f"soak-chaos-{kind}", daemon=True)
        caller.start()
        deadline = time.monotonic() + self.plan.timeout_s
        while not path.exists() and caller.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)  # (the hold file is the worker's event; bounded by the client timeout)
        pid = _read_pid(path)
        if pid is None:
            caller.join(self.plan.timeout_s + 5)
            self._judge(kind, model, x, ended, outcome_prefix="skipped: the hold never began", expect_error=False)
            return
        worker = next((p for p in self._workers(held) if p.pid == pid), None)
        if kill:
            if worker is None or not self._kill(worker):
                caller.join(self.plan.timeout_s + 5)
                self._judge(kind, model, x, ended, outcome_prefix="skipped: the held worker was gone",
                            expect_error=False)
                path.unlink(missing_ok=True)
                return
        caller.join(self.plan.timeout_s + 5)
        path.unlink(missing_ok=True)
        if caller.is_alive():
            self.log.problem(kind, f"the held {model} request did not end {self.plan.timeout_s + 5:g} s after "
                                   f"the client timeout began (its worker, pid {pid}, {'killed' if kill else 'held'})")
            return
        self._judge(kind, model, x, ended, outcome_prefix="request failed", expect_error=True)

    def _judge(self, kind: str, model: str, x: np.ndarray, ended: dict[str, Any], outcome_prefix: str,
               expect_error: bool) -> None:
        if "y" in ended:
            y = ended["y"]
            if y is None or y.shape != x.shape or not np.array_equal(y, EXPECTED[model](x)):
                self.log.problem(kind, f"WRONG ANSWER from the held {model} request: {y!r}")
            else:
                self.log.count(kind, f"{outcome_prefix}: answered right" if not expect_error
                               else "answered right despite the fault")
            return
        error = ended.get("error")
        message = f"{type(error).__name__}: {error}"
        if isinstance(error, InferenceServerException) and "DEADLINE_EXCEEDED" in str(error.status()):
            category, label = HANG, HANG
        else:
            category, label = explain(message)
        if category in (HANG, WRONG, UNEXPLAINED):
            self.log.problem(kind, f"the held {model} request ended {category} after {ended.get('seconds', 0):.1f} s:"
                                   f" {message[:300]}")
        else:
            self.log.count(kind, f"{outcome_prefix}: {label}")

    def _reload(self) -> None:
        model = self.rng.choice(RELOADABLE)
        t0 = time.monotonic()
        try:
            self._grpc.load_model(model, client_timeout=max(60.0, self.plan.timeout_s))
        except InferenceServerException as e:
            self.log.problem("reload", f"loading '{model}' again failed after {time.monotonic() - t0:.1f} s: {e}")
            return
        self.log.count("reload", f"reloaded {model}")

    def _reregister(self) -> None:
        name = self.rng.choice(self.plan.regions)
        try:
            self._grpc.unregister_system_shared_memory(name, client_timeout=self.plan.timeout_s)
        except InferenceServerException as e:
            self.log.count("reregister", f"skipped: unregister refused ({e.message()[:80]})")
            return
        # A region that requests in flight use is only marked by the unregistration and keeps its name until the last
        # of them ends (as in Triton): the registration is refused (ALREADY_EXISTS) until then, and tried again.
        deadline = time.monotonic() + self.plan.timeout_s
        refused = 0
        while True:
            try:
                self._grpc.register_system_shared_memory(name, "/" + name, REGION_BYTES,
                                                           client_timeout=self.plan.timeout_s)
                break
            except InferenceServerException as e:
                if "ALREADY_EXISTS" not in str(e.status()) or time.monotonic() >= deadline:
                    self.log.problem("reregister", f"region '{name}' unregistered but not registered again "
                                                   f"({refused} refusals in {self.plan.timeout_s:g} s): {e}")
                    return
                refused += 1
                time.sleep(0.005)
        self.log.count("reregister", "re-registered a client's region" + (
            " once the calls using it had ended" if refused else " at once"))

    def _kill_frontend(self) -> None:
        frontends = [p for p in self.server.tree() if p.role == "frontend"]
        self._workers()  # (the workers are remembered before their front-end goes: the leftovers check sees them)
        if not frontends:
            self.log.problem("kill-frontend", "no front-end process found")
            return
        victim = self.rng.choice(frontends)
        if self._before_frontend_kill is not None:
            self._before_frontend_kill()
        if self._kill(victim):
            self.frontend_kill.update(pid=victim.pid, at=time.monotonic())
            self.frontend_killed.set()
            self.log.count("kill-frontend", "killed a front-end process")
        else:
            self.log.problem("kill-frontend", f"front-end process pid {victim.pid} was gone before the kill")


def _read_pid(path: pathlib.Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
