"""The worker side of custom metrics (pb_utils.MetricFamily / Metric) against a fake endpoint: calls checked in the
worker with Triton's wording, updates gathered into one METRICS message per flush (a gauge's set then increment as
one SET), the round trips only where an answer is needed, releases when objects are dropped, other threads' limits."""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest

from pytriton.backends import pb_metrics, pb_utils
from pytriton.proxy.messages import MetricOp, ServerToWorker


class FakeEndpoint:
    """Records what is sent; answers a call that wants one with `answer` (a value, or an error)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.sent: list[list[Any]] = []
        self.answer: tuple[float, str] = (0.0, "")
        self._ids = 0

    def send_upstream(self, message: Any, reply: bool = False) -> None:
        if reply:
            self._ids += 1
            message.id = self._ids
        self.sent.append(list(message.metric_ops))

    def bls_poll(self, call_id: int, timeout_ms: int) -> Any:
        value, error = self.answer
        return ServerToWorker(kind=ServerToWorker.BLS_RESULT, id=call_id, final=True, metric_value=value,
                              error=error), []

    def bls_abandon(self, call_id: int) -> None:
        pass


@pytest.fixture
def endpoint():
    fake = FakeEndpoint()
    pb_metrics._client = pb_metrics.MetricsClient(fake, lambda: True, 10, "m_0_0")
    yield fake
    pb_metrics._client = None


def kinds(ops: list[Any]) -> list[str]:
    return [MetricOp.Kind.Name(op.kind) for op in ops]


def test_updates_are_gathered_until_a_flush(endpoint):
    family = pb_utils.MetricFamily("g", "a gauge", pb_utils.MetricFamily.GAUGE)
    gauge = family.Metric(labels={"model": "m"})
    assert [kinds(ops) for ops in endpoint.sent] == [["FAMILY_NEW"], ["METRIC_NEW"]]
    endpoint.sent.clear()
    gauge.increment(5)
    gauge.set(1)
    gauge.increment(2)
    gauge.increment(0.5)
    assert endpoint.sent == []  # no message per update
    pb_metrics.flush()
    (ops,) = endpoint.sent
    assert kinds(ops) == ["SET"] and ops[0].value == 3.5
    pb_metrics.flush()
    assert len(endpoint.sent) == 1  # nothing new: nothing sent


def test_histogram_observations_go_as_bucket_counts(endpoint):
    family = pb_utils.MetricFamily("h", "", pb_utils.MetricFamily.HISTOGRAM)
    histogram = family.Metric(buckets=[1.0, 5.0])
    endpoint.sent.clear()
    for value in (0.5, 1.0, 3, 7, 9):
        histogram.observe(value)
    pb_metrics.flush()
    ((op,),) = endpoint.sent
    assert kinds([op]) == ["OBSERVE"]
    assert list(op.bucket_counts) == [2, 1, 2] and op.count == 5 and op.value == 20.5


def test_value_sends_what_was_gathered_then_asks(endpoint):
    family = pb_utils.MetricFamily("c", "", pb_utils.MetricFamily.COUNTER)
    counter = family.Metric()
    endpoint.sent.clear()
    counter.increment(2)
    endpoint.answer = (7.0, "")
    assert counter.value() == 7.0
    (ops,) = endpoint.sent
    assert kinds(ops) == ["ADD", "VALUE"]


def test_a_family_the_server_refuses_raises_with_tritons_prefix(endpoint):
    endpoint.answer = (0.0, "Family name already exists with different type")
    with pytest.raises(pb_utils.TritonModelException) as info:
        pb_utils.MetricFamily("c", "", pb_utils.MetricFamily.GAUGE)
    assert str(info.value) == ("Error when creating MetricFamily: Failed to process the request for model 'm_0_0', "
                               "message: Family name already exists with different type")


@pytest.mark.parametrize(("kind", "call", "message"), [
    ("COUNTER", lambda m: m.increment(-1), ("Failed to increment metric value: TRITONSERVER_METRIC_KIND_COUNTER can "
                                            "only be incremented monotonically by non-negative values.")),
    ("COUNTER", lambda m: m.set(1), "Failed to set metric value: TRITONSERVER_METRIC_KIND_COUNTER does not support Set"),
    ("COUNTER", lambda m: m.observe(1), ("Failed to observe metric value: TRITONSERVER_METRIC_KIND_COUNTER does not "
                                         "support Observe")),
    ("GAUGE", lambda m: m.observe(1), ("Failed to observe metric value: TRITONSERVER_METRIC_KIND_GAUGE does not "
                                       "support Observe")),
])
def test_misuse_of_a_metric(endpoint, kind, call, message):
    family = pb_utils.MetricFamily("x", "", getattr(pb_utils.MetricFamily, kind))
    metric = family.Metric()
    with pytest.raises(pb_utils.TritonModelException) as info:
        call(metric)
    what, reason = message.split(": ", 1)
    assert str(info.value) == f"{what}: Failed to process the request for model 'm_0_0', message: {reason}"


def test_gauge_may_go_down(endpoint):
    family = pb_utils.MetricFamily("g", "", pb_utils.MetricFamily.GAUGE)
    gauge = family.Metric()
    gauge.increment(-2)
    endpoint.sent.clear()
    pb_metrics.flush()
    assert endpoint.sent[0][0].value == -2


def test_a_dropped_family_deletes_its_metrics_as_in_triton(endpoint):
    family = pb_utils.MetricFamily("c", "", pb_utils.MetricFamily.COUNTER)
    metric = family.Metric()
    metric.increment(2)
    endpoint.sent.clear()
    del family
    gc.collect()
    with pytest.raises(pb_utils.TritonModelException) as info:
        metric.increment(1)
    assert str(info.value) == (
        "Failed to increment metric value: Invalid metric operation as the corresponding 'MetricFamily' has been "
        "deleted. The 'MetricFamily' object should be deleted AFTER its corresponding 'Metric' objects have been "
        "deleted.")
    pb_metrics.flush()
    (ops,) = endpoint.sent
    assert kinds(ops) == ["ADD", "METRIC_DELETE", "FAMILY_DELETE"]
    del metric
    gc.collect()
    pb_metrics.flush()
    assert len(endpoint.sent) == 1  # (deleted once)


def test_dropped_objects_are_released_after_their_updates(endpoint):
    family = pb_utils.MetricFamily("c", "", pb_utils.MetricFamily.COUNTER)
    metric = family.Metric()
    metric.increment(1)
    endpoint.sent.clear()
    del metric
    gc.collect()
    del family
    gc.collect()
    pb_metrics.flush()
    (ops,) = endpoint.sent
    assert kinds(ops) == ["ADD", "METRIC_DELETE", "FAMILY_DELETE"]


def test_other_threads_update_but_do_not_send(endpoint):
    family = pb_utils.MetricFamily("c", "", pb_utils.MetricFamily.COUNTER)
    counter = family.Metric()
    endpoint.sent.clear()
    errors: list[BaseException] = []

    def elsewhere() -> None:
        counter.increment(3)
        pb_metrics.flush()  # not the worker's thread: it waits for the worker's flush
        try:
            counter.value()
        except pb_utils.TritonModelException as exc:
            errors.append(exc)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert endpoint.sent == []
    assert "only from the thread that runs initialize()" in str(errors[0])
    pb_metrics.flush()
    assert kinds(endpoint.sent[0]) == ["ADD"]


def test_a_histogram_with_no_bounds_counts_everything_in_inf(endpoint):
    family = pb_utils.MetricFamily("h", "", pb_utils.MetricFamily.HISTOGRAM)
    histogram = family.Metric(buckets=[])
    endpoint.sent.clear()
    histogram.observe(3)
    pb_metrics.flush()
    assert list(endpoint.sent[0][0].bucket_counts) == [1]


def test_outside_a_server():
    with pytest.raises(pb_utils.TritonModelException, match="only by a model that a pytriton server runs"):
        pb_utils.MetricFamily("c", "", pb_utils.MetricFamily.COUNTER)
    with pytest.raises(TypeError, match="kind must be"):
        pb_utils.MetricFamily("c", "", 5)


ASYNC_METERED = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        family = pb_utils.MetricFamily("made_in_execute", "", pb_utils.MetricFamily.GAUGE)
        family.Metric().set(1)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", r.get_input_tensor_by_name("X").as_numpy()),
                                            pb_utils.Tensor("Z", r.get_input_tensor_by_name("X").as_numpy())])
                for r in requests]
'''


def test_an_async_execute_creates_families_as_a_plain_one_does(endpoint, tmp_path):
    """`async def execute` runs on the model's event loop (another thread) while the worker's thread waits for it:
    it may create a MetricFamily, as an `execute` on the worker's thread may."""
    from tests.backends.python_models import backend_for, request  # noqa: PLC0415 - its model helpers

    backend = backend_for(tmp_path, "async_metered", ASYNC_METERED)
    try:
        (outputs, error, _), = backend.check_outputs([request()], backend([request()]))
        assert error == "" and [name for name, _, _ in outputs] == ["Y", "Z"]
        assert kinds(endpoint.sent[0]) == ["FAMILY_NEW"]  # (created, with the server's answer)
    finally:
        backend.close()
