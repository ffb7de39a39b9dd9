"""One request (or one short series) of each kind the chaos soak sends, through the real clients, every answer
checked against what the model must answer (soak_lib.chaos_repo.EXPECTED).

Kinds, for each served model M (double, pipeline, bls):

- `grpc-M`, `http-M`: the tensors in the request and the answer;
- `grpc-M-shm`, `http-M-shm`: input and output in the slot's system shared-memory regions;
- `stream-M`: a gRPC stream (ModelStreamInfer) carrying 1-4 requests, each answer matched by its request id;
- `deadline-M`: a gRPC call with a deadline of 1-5 ms whose output goes to the slot's output region, then at once
  `after-deadline-M`: a normal call on the SAME output region (its input in the input region). A withdrawn call's
  worker that writes the region after the follow-up's answer is a wrong answer (issue 40).

Before each use of the output region, the slot checks that the region still holds the last answer read from it
(`late-write`): nothing may write into a client's region once its call has been answered or withdrawn.

An ordinary call carries a client timeout (the server's execution timeout + a margin): one that gets no answer
within it raises Hang. A wrong value raises WrongResult. Every other error is raised as the client reported it, to
be classed by soak_lib.chaos_outcomes.
"""

from __future__ import annotations

import dataclasses
import queue
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from soak_lib.chaos_repo import EXPECTED, SERVED, TENSORS
from soak_lib.requests import GRPC_CHANNEL_ARGS

FLOATS = {"small": 16, "64kib": 16384}
REGION_BYTES = FLOATS["64kib"] * 4
DEADLINE_S = (0.001, 0.005)
STREAM_REQUESTS = (1, 4)

PLAIN_KINDS = [f"{p}-{m}{s}" for m in SERVED for p in ("grpc", "http") for s in ("", "-shm")]
STREAM_KINDS = [f"stream-{m}" for m in SERVED]
DEADLINE_KINDS = [f"deadline-{m}" for m in SERVED]
CHAOS_KINDS = PLAIN_KINDS + STREAM_KINDS + DEADLINE_KINDS
# what a slot records besides the kinds it picks: the follow-ups of the deadline calls, and the region checks
FOLLOW_UP = "after-"
LATE_WRITE = "late-write"


class WrongResult(Exception):
    """An answer (or a region) that holds other values than the model must answer."""


class Hang(Exception):
    """An ordinary call that got no answer within its client timeout."""


def check(kind: str, model: str, x: np.ndarray, y: np.ndarray | None,
          withdrawn: tuple[str, np.ndarray] | None = None) -> None:
    """y must be the model's answer for x; `withdrawn`: the (model, input) of the last call on the same output
    region that was cut by its deadline, named in the error when y is its answer."""
    want = EXPECTED[model](x)
    if y is None:
        raise WrongResult(f"wrong result ({kind}): no output")
    if y.shape != want.shape:
        raise WrongResult(f"wrong result ({kind}): shape {list(y.shape)}, expected {list(want.shape)}")
    if not np.array_equal(y, want):
        raise WrongResult(f"wrong result ({kind}): {_difference(y, want, withdrawn)}")


def _difference(y: np.ndarray, want: np.ndarray, withdrawn: tuple[str, np.ndarray] | None) -> str:
    bad = np.flatnonzero(y.reshape(-1) != want.reshape(-1))
    text = (f"{bad.size} of {want.size} values differ, first at {bad[0]}: {y.reshape(-1)[bad[0]]} instead of "
            f"{want.reshape(-1)[bad[0]]}")
    if withdrawn is not None:
        model, x = withdrawn
        stale = EXPECTED[model](x).reshape(-1)
        if bad[-1] < stale.size and np.array_equal(y.reshape(-1)[bad], stale[bad]):
            text += (f"; they are the answer ({stale.size} values) of the call on this region cut by its deadline "
                     f"before ({model}), written late")
    return text


class Inputs:
    """Inputs that differ from one call to the next, exact in float32 through 2x + 1 and (x + 1) * 2."""

    def __init__(self, seed: int) -> None:
        self._base = {s: np.arange(n, dtype=np.float32).reshape(1, n) for s, n in FLOATS.items()}
        self._n = seed % 997 * 1000

    def next(self, size: str) -> np.ndarray:
        self._n = (self._n + 1) % 1_000_000
        return self._base[size] + np.float32(self._n)


@dataclasses.dataclass
class Outcome:
    """One call's end: `ok`, `cancelled` (a short deadline that passed: expected) or the exception it raised."""

    kind: str
    seconds: float
    result: str | BaseException


class ChaosSlot:
    """One client thread's gRPC and HTTP clients and its two shared-memory regions (64 KiB each: input and output;
    even slots register them over gRPC, odd ones over HTTP); `send(kind)` makes one call (two for a deadline pair).
    """

    def __init__(self, grpc_url: str, http_url: str, region_prefix: str, index: int, timeout_s: float,
                 rng: random.Random) -> None:
        self.timeout_s, self.rng = timeout_s, rng
        self.grpc = grpcclient.InferenceServerClient(grpc_url, channel_args=GRPC_CHANNEL_ARGS)
        self.http = httpclient.InferenceServerClient(http_url, connection_timeout=timeout_s,
                                                     network_timeout=timeout_s)
        self.inputs = Inputs(index)
        self.names = {"in": f"{region_prefix}in", "out": f"{region_prefix}out"}
        self.handles: dict[str, Any] = {}
        self.out_holds: np.ndarray | None = None  # what the output region must hold now (None: not known)
        self.withdrawn: tuple[str, np.ndarray] | None = None  # the last deadline call on the output region
        self._over_grpc = index % 2 == 0
        try:
            for role, name in self.names.items():
                self.handles[role] = shm.create_shared_memory_region(name, "/" + name, REGION_BYTES)
                self._register(name)
        except BaseException:
            self.close()
            raise

    def _register(self, name: str) -> None:
        if self._over_grpc:
            self.grpc.register_system_shared_memory(name, "/" + name, REGION_BYTES, client_timeout=self.timeout_s)
        else:
            self.http.register_system_shared_memory(name, "/" + name, REGION_BYTES)

    def close(self) -> list[str]:
        """Unregister and remove the regions, close the clients; the errors met on the way."""
        errors = []
        for name in self.names.values():
            try:
                if self._over_grpc:
                    self.grpc.unregister_system_shared_memory(name, client_timeout=self.timeout_s)
                else:
                    self.http.unregister_system_shared_memory(name)
            except Exception as e:  # noqa: BLE001 (reported, and the regions are removed all the same)
                errors.append(f"unregister '{name}': {e}")
        for handle in self.handles.values():
            shm.destroy_shared_memory_region(handle)
        self.handles.clear()
        self.grpc.close()
        self.http.close()
        return errors

    # ------------------------------------------------------------------------------------------ one call ---
    def send(self, kind: str) -> list[Outcome]:
        """The call(s) of this kind, each with its outcome."""
        family, model, *with_shm = kind.split("-")  # (the served models' names hold no '-')
        if family == "deadline":
            return self._deadline_pair(model)
        if family == "stream":
            return [self._timed(kind, lambda: self._stream(kind, model))]
        return [self._timed(kind, lambda: self._plain(kind, model, family, bool(with_shm)))]

    def _timed(self, kind: str, call: Callable[[], str], ordinary: bool = True) -> Outcome:
        t0 = time.perf_counter()
        try:
            result: str | BaseException = call()
        except (WrongResult, Hang) as e:
            result = e
        except Exception as e:  # noqa: BLE001 (every error is counted by class)
            took = time.perf_counter() - t0
            result = Hang(f"no answer within {self.timeout_s:g} s ({took:.1f} s): {type(e).__name__}: {e}") \
                if ordinary and took >= self.timeout_s * 0.95 else e
        return Outcome(kind, time.perf_counter() - t0, result)

    def _check_out_region(self) -> Outcome | None:
        """The output region must still hold the last answer read from it."""
        held, self.out_holds = self.out_holds, None
        if held is None:
            return None
        now = np.array(shm.get_contents_as_numpy(self.handles["out"], np.float32, list(held.shape)))
        if np.array_equal(now, held):
            return None
        return Outcome(LATE_WRITE, 0.0, WrongResult(
            f"late write: the output region changed after its answer was read: "
            f"{_difference(now, held, self.withdrawn)}"))

    def _tensors(self, protocol: str, model: str, x: np.ndarray, in_shm: bool, out_shm: bool) -> tuple[Any, Any]:
        lib: Any = grpcclient if protocol == "grpc" else httpclient
        in_name, out_name = TENSORS[model]
        inp = lib.InferInput(in_name, list(x.shape), "FP32")
        out = lib.InferRequestedOutput(out_name) if protocol == "grpc" else \
            lib.InferRequestedOutput(out_name, binary_data=True)
        if in_shm:
            shm.set_shared_memory_region(self.handles["in"], [x])
            inp.set_shared_memory(self.names["in"], x.nbytes)
        elif protocol == "grpc":
            inp.set_data_from_numpy(x)
        else:
            inp.set_data_from_numpy(x, binary_data=True)
        if out_shm:
            out.set_shared_memory(self.names["out"], x.nbytes)
        return inp, out

    def _read_out(self, x: np.ndarray) -> np.ndarray:
        return np.array(shm.get_contents_as_numpy(self.handles["out"], np.float32, list(x.shape)))

    def _plain(self, kind: str, model: str, protocol: str, with_shm: bool) -> str:
        x = self.inputs.next(self.rng.choice(list(FLOATS)))
        inp, out = self._tensors(protocol, model, x, with_shm, with_shm)
        if protocol == "grpc":
            result = self.grpc.infer(model, [inp], outputs=[out], client_timeout=self.timeout_s)
        else:
            result = self.http.infer(model, [inp], outputs=[out])
        y = self._read_out(x) if with_shm else result.as_numpy(TENSORS[model][1])
        check(kind, model, x, y, self.withdrawn if with_shm else None)
        if with_shm:
            self.out_holds = y
        return "ok"

    def send_checked(self, kind: str) -> list[Outcome]:
        """send(kind), preceded by the output region's check when the kind writes into it."""
        outcomes = []
        if kind.endswith("-shm") or kind.startswith("deadline-"):
            late = self._check_out_region()
            if late is not None:
                outcomes.append(late)
        return outcomes + self.send(kind)

    def _deadline_pair(self, model: str) -> list[Outcome]:
        """A call cut by a 1-5 ms deadline, its answer to go into the output region, then at once a normal call
        on the same region."""
        kind = f"deadline-{model}"
        x = self.inputs.next(self.rng.choice(list(FLOATS)))

        def cut() -> str:
            inp, out = self._tensors("grpc", model, x, in_shm=False, out_shm=True)
            try:
                self.grpc.infer(model, [inp], outputs=[out], client_timeout=self.rng.uniform(*DEADLINE_S))
            except InferenceServerException as e:
                if "DEADLINE_EXCEEDED" in str(e.status()):
                    self.withdrawn = (model, x)
                    return "cancelled"
                raise
            y = self._read_out(x)
            check(kind, model, x, y, self.withdrawn)  # answered in time: its answer must be right too
            return "ok"

        first = self._timed(kind, cut, ordinary=False)
        follow_kind = f"{FOLLOW_UP}deadline-{model}"
        second = self._timed(follow_kind, lambda: self._plain(follow_kind, model, "grpc", with_shm=True))
        return [first, second]

    def _stream(self, kind: str, model: str) -> str:
        """1-4 requests on one gRPC stream; each answer within the client timeout, matched by request id."""
        answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
        sent: dict[str, np.ndarray] = {}
        try:
            self.grpc.start_stream(callback=lambda result, error: answers.put((result, error)))
            for i in range(self.rng.randint(*STREAM_REQUESTS)):
                x = self.inputs.next(self.rng.choice(list(FLOATS)))
                inp, out = self._tensors("grpc", model, x, in_shm=False, out_shm=False)
                sent[str(i)] = x
                self.grpc.async_stream_infer(model, [inp], outputs=[out], request_id=str(i))
            deadline = time.monotonic() + self.timeout_s
            while sent:
                try:
                    result, error = answers.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise Hang(f"stream: {len(sent)} answer(s) missing after {self.timeout_s:g} s") from None
                if error is not None:
                    raise error
                request_id = result.get_response().id
                if request_id not in sent:
                    raise WrongResult(f"wrong result ({kind}): an answer for request id {request_id!r}, not sent "
                                      "or answered twice")
                check(kind, model, sent.pop(request_id), result.as_numpy(TENSORS[model][1]))
        finally:
            self._close_stream()
        return "ok"

    def _close_stream(self) -> None:
        """End the stream at once (whatever is still pending is cancelled: never a wait without bound).

        tritonclient's stop_stream(cancel_requests=True) leaves gRPC's thread that reads the stream's requests
        blocked on the stream's request queue for good: one thread per stream (30,000 in a 30-minute run, until the
        machine ran out of pids). The end marker it would have sent without cancelling lets that thread end."""
        stream = getattr(self.grpc, "_stream", None)
        try:
            self.grpc.stop_stream(cancel_requests=True)
        finally:
            requests = getattr(stream, "_request_queue", None)
            if requests is not None:
                requests.put(None)
