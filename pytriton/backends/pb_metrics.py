"""Custom metrics of Python-backend models: `pb_utils.MetricFamily` and its `Metric`s, as Triton's python backend
defines them (re-exported by `pb_utils`).

The server keeps the values (instances of a model share a family and, with the same labels, a metric); a worker
checks each call itself, with Triton's wording, and gathers the updates: `increment`/`set`/`observe` cost no message of
their own. What was gathered goes up in one METRICS message before each result the worker sends (so that a client
that has its response finds the metrics updated), when the worker is idle, and before a call that needs an answer:
creating a family (its kind may clash with one of that name), creating a metric (on /metrics once `Metric()` returns,
as in Triton) and `value()` (the server's value, which every instance updates). Dropping a `Metric` (or
`MetricFamily`) object releases it, as in Triton; a worker that goes away releases all of its own.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from pytriton.proxy.messages import MetricOp, WorkerToServer

logger = logging.getLogger("pytriton.backends")

# Triton core's checks (tritonserver metric_family.cc / prometheus-cpp), worded as Triton words them.
_KIND_NAME = ("TRITONSERVER_METRIC_KIND_COUNTER", "TRITONSERVER_METRIC_KIND_GAUGE", "TRITONSERVER_METRIC_KIND_HISTOGRAM")


class MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


def _model_exception(message: str) -> Exception:
    from pytriton.backends import pb_utils  # (pb_utils re-exports this module)

    return pb_utils.TritonModelException(message)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            return float(value.__float__())  # numpy scalars
        except (AttributeError, TypeError, ValueError):
            raise TypeError(f"{what}(): the value must be a number, got {type(value).__name__}") from None
    return float(value)


class _Pending:
    """The updates of one metric not sent yet: a gauge's last `set` and what was added since, a counter's sum of
    increments, a histogram's observations per bucket."""

    __slots__ = ("add", "counts", "observed", "set", "total")

    def __init__(self, buckets: int) -> None:
        self.set: float | None = None
        self.add = 0.0
        self.counts = [0] * (buckets + 1)  # (a histogram's; one above every bound)
        self.total = 0.0
        self.observed = 0


class MetricsClient:
    """The worker's side of custom metrics: handles, the gathered updates, and the messages to the server."""

    def __init__(self, endpoint: Any, alive: Callable[[], bool], poll_ms: int, instance: str = ""):
        self.endpoint = endpoint
        self.thread = threading.get_ident()  # the worker's thread (initialize, execute, finalize run on it)
        self.acting: int | None = None  # a thread the worker's thread waits for meanwhile (an `async def execute`'s)
        self.instance = instance  # Triton's instance name, in the wording of the errors the server side gives
        self.alive = alive
        self.poll_ms = poll_ms
        self._lock = threading.RLock()  # (an object dropped by the garbage collector releases itself under it)
        self._handles = 0
        self._ops: list[Any] = []  # creations and releases, in order, before the updates
        self._pending: dict[int, _Pending] = {}
        self._buckets: dict[int, list[float]] = {}

    def refusal(self, what: str, reason: str) -> Exception:
        """An error Triton's parent process gives (the checks made here are made there in Triton), in its words."""
        return _model_exception(f"{what}: Failed to process the request for model '{self.instance}', message: "
                                f"{reason}")

    def _next_handle(self) -> int:
        self._handles += 1
        return self._handles

    def _on_thread(self, what: str) -> None:
        if threading.get_ident() not in (self.thread, self.acting):
            raise _model_exception(f"{what}: a MetricFamily can be created and a value() read only from the thread "
                                   "that runs initialize(), execute() and finalize(); other threads may update "
                                   "metrics")

    # ---- calls of the model ----------------------------------------------------------------------
    def new_family(self, name: str, description: str, kind: int) -> int:
        self._on_thread("Error when creating MetricFamily")
        with self._lock:
            handle = self._next_handle()
            self._ops.append(MetricOp(kind=MetricOp.FAMILY_NEW, handle=handle, name=name, description=description,
                                      metric_kind=kind))
        answer = self._call()
        if answer.error:
            raise self.refusal("Error when creating MetricFamily", answer.error)
        return handle

    def new_metric(self, family: int, labels: dict[str, str], buckets: list[float] | None) -> int:
        waits = threading.get_ident() in (self.thread, self.acting)  # (another's goes with the worker's next flush)
        with self._lock:
            handle = self._next_handle()
            if waits:
                self._ops.extend(self._updates())  # (the creation last: the answer is about it)
            self._ops.append(MetricOp(kind=MetricOp.METRIC_NEW, handle=handle, family=family, labels=labels,
                                      buckets=buckets or ()))
            self._pending[handle] = _Pending(len(buckets) if buckets is not None else 0)
            if buckets is not None:
                self._buckets[handle] = buckets
        if not waits:
            return handle
        # On /metrics (with its zero value) once this returns, as Triton shows a metric it creates: the server has
        # it when it answers (a message sent without waiting may not be read before the model's own next scrape).
        answer = self._call()
        if answer.error:
            with self._lock:
                self._pending.pop(handle, None)
                self._buckets.pop(handle, None)
            raise self.refusal("Error when creating Metric", answer.error)
        return handle

    def release(self, handle: int, metric: bool) -> None:
        with self._lock:
            self._flush_one(handle)
            self._pending.pop(handle, None)
            self._buckets.pop(handle, None)
            self._ops.append(MetricOp(kind=MetricOp.METRIC_DELETE if metric else MetricOp.FAMILY_DELETE,
                                      handle=handle))

    def add(self, handle: int, amount: float) -> None:
        with self._lock:
            pending = self._pending[handle]
            if pending.set is not None:
                pending.set += amount
            else:
                pending.add += amount

    def set(self, handle: int, value: float) -> None:
        with self._lock:
            pending = self._pending[handle]
            pending.set = value
            pending.add = 0.0

    def observe(self, handle: int, value: float) -> None:
        buckets = self._buckets[handle]
        index = next((i for i, bound in enumerate(buckets) if value <= bound), len(buckets))
        with self._lock:
            pending = self._pending[handle]
            pending.counts[index] += 1
            pending.total += value
            pending.observed += 1

    def value(self, handle: int) -> float:
        self._on_thread("Failed to get metric value")
        with self._lock:
            self._ops.extend(self._updates())
            self._ops.append(MetricOp(kind=MetricOp.VALUE, handle=handle))
        answer = self._call()
        if answer.error:
            raise self.refusal("Failed to get metric value", answer.error)
        return float(answer.metric_value)

    # ---- transport ---------------------------------------------------------------------------
    def _flush_one(self, handle: int) -> None:
        pending = self._pending.get(handle)
        if pending is not None:
            self._ops.extend(self._update(handle, pending))

    @staticmethod
    def _update(handle: int, pending: _Pending) -> list[Any]:
        ops = []
        if pending.set is not None:
            ops.append(MetricOp(kind=MetricOp.SET, handle=handle, value=pending.set))
        elif pending.add:
            ops.append(MetricOp(kind=MetricOp.ADD, handle=handle, value=pending.add))
        if pending.observed:
            ops.append(MetricOp(kind=MetricOp.OBSERVE, handle=handle, value=pending.total, count=pending.observed,
                                bucket_counts=pending.counts))
            pending.counts = [0] * len(pending.counts)
            pending.total = 0.0
            pending.observed = 0
        pending.set = None
        pending.add = 0.0
        return ops

    def _updates(self) -> list[Any]:
        ops = []
        for handle, pending in self._pending.items():
            if pending.set is not None or pending.add or pending.observed:
                ops.extend(self._update(handle, pending))
        return ops

    def _take(self) -> list[Any]:
        with self._lock:
            ops, self._ops = self._ops, []
            ops.extend(self._updates())
        return ops

    def flush(self) -> None:
        """Send what was gathered (from the worker's thread; elsewhere it waits for the worker's next flush)."""
        if not (self._ops or self._pending) or threading.get_ident() != self.thread:
            return  # (nothing was ever gathered: no metric exists; the worker's flush before each result)
        ops = self._take()
        if ops:
            message = WorkerToServer(kind=WorkerToServer.METRICS)
            message.metric_ops.extend(ops)
            try:
                self.endpoint.send_upstream(message)
            except Exception:  # metrics must not fail the result they go before
                logger.warning("could not send custom metric updates", exc_info=True)

    def _call(self) -> Any:
        """Send what was gathered (the op that wants an answer last) and wait for the answer."""
        message = WorkerToServer(kind=WorkerToServer.METRICS)
        message.metric_ops.extend(self._take())
        self.endpoint.send_upstream(message, reply=True)
        while True:
            got = self.endpoint.bls_poll(message.id, self.poll_ms)
            if got is not None:
                return got[0]
            if not self.alive():
                self.endpoint.bls_abandon(message.id)
                raise _model_exception("the server went away while a custom-metrics call waited for its answer")


# The worker's client, set by the worker before the model's initialize(); None elsewhere.
_client: MetricsClient | None = None


def _current() -> MetricsClient:
    if _client is None:
        raise _model_exception("custom metrics (pb_utils.MetricFamily) can be used only by a model that a pytriton "
                               "server runs")
    return _client


def flush() -> None:
    """Send the gathered updates now (the worker calls it when idle and before it exits)."""
    if _client is not None:
        _client.flush()


class MetricFamily:
    """A family of metrics of one kind: `MetricFamily(name, description, kind)`, then `family.Metric(labels=...)`.

    Families are server-wide: another model (or instance) that creates the same name and kind shares it. As in Triton,
    a family must outlive its metrics: once it is dropped, they are deleted and using them raises."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind | int):
        self._client: MetricsClient | None = None
        for arg, value in (("name", name), ("description", description)):
            if not isinstance(value, str):
                raise TypeError(f"MetricFamily(): {arg} must be a str, got {type(value).__name__}")
        if isinstance(kind, bool) or not isinstance(kind, int) or kind not in tuple(MetricKind):
            raise TypeError("MetricFamily(): kind must be MetricFamily.COUNTER, MetricFamily.GAUGE or "
                            f"MetricFamily.HISTOGRAM, got {kind!r}")
        client = _current()
        self._name = name
        self._kind = MetricKind(kind)
        self._metrics: weakref.WeakSet[Metric] = weakref.WeakSet()
        self._handle = client.new_family(name, description, int(kind))
        self._client = client

    def Metric(self, labels: dict[str, str] | None = None, buckets: list[float] | None = None) -> Metric:
        """A metric of this family with these labels (the same labels: the same metric); a histogram's needs
        `buckets`, its upper bounds in increasing order."""
        client = self._client
        assert client is not None
        if labels is not None and not isinstance(labels, dict):
            raise _model_exception("Failed to create metric. Labels must be a dictionary.")
        if buckets is not None:
            if not isinstance(buckets, list):
                raise _model_exception("Failed to create metric. Buckets must be a list.")
            if self._kind != MetricKind.HISTOGRAM:
                raise _model_exception("Failed to create metric. Unexpected buckets found.")
            bounds = [_number(b, "Metric") for b in buckets]
            if any(b <= a for a, b in itertools.pairwise(bounds)):
                raise client.refusal("Error when creating Metric", "Bucket Boundaries must be strictly sorted")
        elif self._kind == MetricKind.HISTOGRAM:
            raise _model_exception("Failed to create metric. Missing required buckets.")
        else:
            bounds = None
        checked: dict[str, str] = {}
        for key, value in (labels or {}).items():
            if not isinstance(key, str) or not _valid_label_name(key, self._kind):
                raise client.refusal("Error when creating Metric", "Invalid label name")
            if not isinstance(value, str):
                raise client.refusal("Error when creating Metric",
                                     f"the value of label '{key}' must be a string, got {type(value).__name__}")
            checked[key] = value
        metric = Metric(self, client.new_metric(self._handle, checked, bounds))
        self._metrics.add(metric)
        return metric

    def __del__(self) -> None:
        mine: MetricsClient | None = getattr(self, "_client", None)
        if mine is None or mine is not _client:  # (not once its worker has ended)
            return
        with contextlib.suppress(Exception):  # (interpreter shutdown)
            for metric in list(self._metrics):  # (as Triton clears them: they cannot be used any more)
                metric._clear()
            mine.release(self._handle, metric=False)


def _valid_label_name(name: str, kind: int) -> bool:
    if kind == MetricKind.HISTOGRAM and name == "le":
        return False
    return (bool(name) and not name[0].isdigit() and not name.startswith("__")
            and all(c.isascii() and (c.isalnum() or c == "_") for c in name))


_CLEARED = ("Invalid metric operation as the corresponding 'MetricFamily' has been deleted. The 'MetricFamily' object "
            "should be deleted AFTER its corresponding 'Metric' objects have been deleted.")


class Metric:
    """One metric of a family (one set of labels): `increment`, `set`, `observe`, `value`, as its kind allows."""

    def __init__(self, family: MetricFamily, handle: int):
        self._handle = handle
        self._kind = family._kind
        self._client = family._client
        self._cleared = False

    def _clear(self) -> None:
        if not self._cleared:
            self._cleared = True
            client = self._client
            if client is not None and client is _client:
                client.release(self._handle, metric=True)

    def _check(self, what: str, op: str, allowed: bool) -> MetricsClient:
        if self._cleared:
            raise _model_exception(f"Failed to {what}: {_CLEARED}")
        client = self._client
        assert client is not None
        if not allowed:
            raise client.refusal(f"Failed to {what}", f"{_KIND_NAME[self._kind]} does not support {op}")
        return client

    def increment(self, value: float) -> None:
        amount = _number(value, "increment")
        client = self._check("increment metric value", "Increment", self._kind != MetricKind.HISTOGRAM)
        if self._kind == MetricKind.COUNTER and amount < 0:
            raise client.refusal("Failed to increment metric value", "TRITONSERVER_METRIC_KIND_COUNTER can only be "
                                 "incremented monotonically by non-negative values.")
        client.add(self._handle, amount)

    def set(self, value: float) -> None:
        number = _number(value, "set")
        self._check("set metric value", "Set", self._kind == MetricKind.GAUGE).set(self._handle, number)

    def observe(self, value: float) -> None:
        number = _number(value, "observe")
        self._check("observe metric value", "Observe", self._kind == MetricKind.HISTOGRAM).observe(self._handle, number)

    def value(self) -> float:
        """The current value, as the server holds it (every instance that shares this metric adds to it)."""
        return self._check("get metric value", "Value", self._kind != MetricKind.HISTOGRAM).value(self._handle)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # (interpreter shutdown)
            self._clear()


__all__ = ["Metric", "MetricFamily", "MetricKind", "MetricsClient", "flush"]
