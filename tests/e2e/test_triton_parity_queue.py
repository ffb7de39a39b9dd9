"""The dynamic batcher's queue policy as a client of tritonserver 2.51 sees it: a full queue (status, words, which
request is refused), priority levels with their own bounds, a request's `timeout` under REJECT and DELAY, with and
without `allow_timeout_override` and a default timeout, `dynamic_batching` with max_batch_size 0 (a queue policy
without batching), request `priority` and `timeout` parameters out of range or of the wrong kind over HTTP and gRPC,
and the statistics and failure metrics all that leaves; which waiting requests batch together (an input with
`allow_ragged_batch` or without, an optional input given or not).

The models (tests/repositories/triton_parity `q_*`, Triton's own Python API, one instance, max_batch_size 1 but
`q_no_batch`'s 0) hold a
request given a 'release' file until that file exists, so what waits is known: the test waits for the pending-request
gauge, never for a guessed time. The answers pytriton gives are pinned; (slow, where it is installed) the real
tritonserver 2.51 gives the same on the same repository."""

from __future__ import annotations

import json
import re
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pytest

from tests._support.paths import REPOSITORIES
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, asked_of_real_tritonserver
from tests._support.serving import serve
from tests._support.triton_parity_calls import grpc_infer, http_infer
from tests._support.waits import wait_until

REPOSITORY = REPOSITORIES / "triton_parity"
MODELS = ("q_full", "q_levels", "q_delay", "q_override_only", "q_no_override", "q_plain", "q_unbatched", "q_no_batch",
          "q_ragged", "q_not_ragged", "q_optional")
ARGS = ("--model-control-mode", "explicit", *(arg for model in MODELS for arg in ("--load-model", model)))
UNSIGNED = "Unable to parse '{}': attempt to access JSON non-unsigned-integer as unsigned-integer"
FULL = "[request id: {}] Exceeds maximum queue size"
EXPIRED = "Request timeout expired"
GRPC_PRIORITY_KIND = "invalid value type for 'priority' parameter, expected int64_param or uint64_param."
GRPC_TIMEOUT_KIND = "invalid value type for 'timeout' parameter, expected int64_param."
HTTP_VALUES = {"-1": -1, "1.5": 1.5, "'1'": "1", "true": True, "2**64": 2**64, "2**64-1": 2**64 - 1, "0": 0,
               "7": 7, "null": None}
GRPC_VALUES = {"int64 -1": ("int64_param", -1), "uint64 3": ("uint64_param", 3), "string": ("string_param", "1"),
               "bool": ("bool_param", True), "double": ("double_param", 1.0), "int64 max": ("int64_param", 2**63 - 1),
               "int64 0": ("int64_param", 0)}
ANSWERED = "answered"


class Queue:
    """One server's addresses, the requests sent in the background and their answers."""

    def __init__(self, http: str, grpc_url: str, metrics: str, scratch: Path):
        self.http, self.grpc, self.metrics, self.scratch = http, grpc_url, metrics, scratch
        self.answers: dict[str, Any] = {}
        self.threads: list[threading.Thread] = []
        self.counted: dict[str, int] = {}  # model -> its requests that the statistics count (served, or rejected)
        self.lock = threading.Lock()

    def http_infer(self, model: str, parameters: dict[str, Any] | None = None, **kwargs: Any) -> tuple[int, Any]:
        return self._count(model, http_infer(self.http, model, parameters, **kwargs))

    def grpc_infer(self, model: str, parameters: dict[str, Any] | None = None, **kwargs: Any) -> tuple[str, str]:
        return self._count(model, grpc_infer(self.grpc, model, parameters, **kwargs))

    def _count(self, model: str, answer: Any) -> Any:
        if answer[0] in (200, "OK") or answer[1] == EXPIRED:  # (one refused at the door is in no statistics)
            with self.lock:
                self.counted[model] = self.counted.get(model, 0) + 1
        return answer

    def pending(self, model: str) -> float:
        text = urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=30).read().decode()
        return sum(float(v) for v in re.findall(
            rf'^nv_inference_pending_request_count\{{model="{model}",[^}}]*\}} (\S+)$', text, re.M))

    def failures(self, model: str) -> dict[str, float]:
        text = urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=30).read().decode()
        return dict(sorted(re.findall(
            rf'^nv_inference_request_failure\{{model="{model}",reason="(\w+)",version="1"\}} (\S+)$', text, re.M)))

    def stats(self, model: str) -> dict[str, int]:
        """`model`'s counts once every request it answered is in them (tritonserver 2.51 counts one after answering
        it)."""
        def read() -> dict[str, int]:
            with urllib.request.urlopen(f"http://{self.http}/v2/models/{model}/stats", timeout=30) as answer:
                stats = json.loads(answer.read())["model_stats"][0]
            counts = {kind: stats["inference_stats"][kind]["count"] for kind in ("success", "fail", "queue")}
            return counts | {"execution_count": stats["execution_count"]}

        expected = self.counted.get(model, 0)
        wait_until(lambda: (lambda c: c["success"] + c["fail"] >= expected)(read()), f"{model}'s statistics")
        return read()

    def background(self, label: str, call: Callable[[], Any]) -> None:
        def run() -> None:
            self.answers[label] = call()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)

    def hold(self, model: str) -> Path:
        """Send a request that runs until the returned file exists; return once it runs."""
        started, release = self.scratch / f"{model}.started", self.scratch / f"{model}.release"
        self.background("busy", lambda: self.http_infer(model, {"started": str(started),
                                                                      "release": str(release)}))
        wait_until(started.exists, f"{model}'s first request running")
        return release

    def enqueue(self, model: str, label: str, call: Callable[[], Any]) -> float:
        """Send `call` in the background and return once it waits in `model`'s queue (when it was seen there)."""
        waiting = self.pending(model)
        self.background(label, call)
        wait_until(lambda: self.pending(model) == waiting + 1, f"{label} waiting in {model}'s queue")
        return time.monotonic()

    def finish(self, release: Path, past: float = 0.0) -> dict[str, Any]:
        """Release the held request (once `past`, a monotonic time, is over) and return every answer with the order
        the requests ran in."""
        while time.monotonic() <= past:  # (a deadline known to have passed by then: no guess)
            time.sleep(0.001)
        release.touch()
        for thread in self.threads:
            thread.join(60)
        answers, self.answers, self.threads = self.answers, {}, []
        order = sorted((answer[1] for answer in answers.values() if isinstance(answer[1], int)))
        return {label: (status, order.index(body) if isinstance(body, int) else body)
                for label, (status, body) in sorted(answers.items())}


def _batched(q: Queue, model: str, inputs: list[tuple[str, list[int]]]) -> tuple[int, Any]:
    """A request to a q_ragged-like model with these (name, shape) FP32 inputs: (status, (BATCH, NAMES)) or the
    error."""
    body = {"inputs": [{"name": name, "datatype": "FP32", "shape": shape, "data": [1.0] * (shape[0] * shape[1])}
                       for name, shape in inputs]}
    request = urllib.request.Request(f"http://{q.http}/v2/models/{model}/infer", json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            outputs = {o["name"]: o["data"] for o in json.loads(answer.read())["outputs"]}
    except urllib.error.HTTPError as error:
        return q._count(model, (error.code, json.loads(error.read())["error"]))
    return q._count(model, (200, (outputs["BATCH"][0], outputs["NAMES"][0])))


def _batching(q: Queue) -> dict[str, Any]:
    """Three or four requests wait behind a held one, then run: which of them ran together."""
    out: dict[str, Any] = {}
    cases = {"q_not_ragged": [[("X", [1, 2])], [("X", [1, 3])], [("X", [1, 2])]],
             "q_ragged": [[("X", [1, 2])], [("X", [1, 3])], [("X", [1, 2])]],
             "q_optional": [[("X", [1, 1]), ("B", [1, 1])], [("X", [1, 1])], [("X", [1, 1]), ("B", [1, 1])],
                            [("X", [1, 1]), ("B", [1, 1])]]}
    for model, requests in cases.items():
        release = q.hold(model)
        for index, inputs in enumerate(requests):
            q.enqueue(model, f"r{index}", lambda m=model, i=inputs: _batched(q, m, i))
        release.touch()
        for thread in q.threads:
            thread.join(60)
        out[f"{model} answers"] = {label: answer for label, answer in sorted(q.answers.items()) if label != "busy"}
        q.answers, q.threads = {}, []
        q.stats(model)  # (once every answer is counted)
        with urllib.request.urlopen(f"http://{q.http}/v2/models/{model}/stats", timeout=30) as answer:
            stats = json.loads(answer.read())["model_stats"][0]
        out[f"{model} executions"] = (stats["execution_count"], {
            str(b["batch_size"]): b["compute_infer"]["count"] for b in stats["batch_stats"]})
    out["q_optional without its required input"] = _batched(q, "q_optional", [("B", [1, 1])])
    with urllib.request.urlopen(f"http://{q.http}/v2/models/q_ragged/config", timeout=30) as answer:
        out["q_ragged config input"] = json.loads(answer.read())["input"]
    return out


def _kinds(q: Queue, model: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("priority", "timeout"):
        for label, value in HTTP_VALUES.items():
            status, body = q.http_infer(model, {name: value})
            out[f"{model} http {name} {label}"] = (status, ANSWERED if status == 200 else body)
        for label, (kind, value) in GRPC_VALUES.items():
            out[f"{model} grpc {name} {label}"] = q.grpc_infer(model, {name: (kind, value)})
    out[f"{model} stats"] = q.stats(model)
    out[f"{model} failures"] = q.failures(model)
    return out


def _scenario(http: str, grpc_url: str, metrics: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        q = Queue(http, grpc_url, metrics, Path(scratch))
        out = _kinds(q, "q_plain") | _kinds(q, "q_unbatched") | _batching(q)

        release = q.hold("q_full")  # max_queue_size 2: the third waiting request is refused at once
        q.enqueue("q_full", "a", lambda: q.http_infer("q_full"))
        q.enqueue("q_full", "b", lambda: q.grpc_infer("q_full"))
        out["q_full third http"] = q.http_infer("q_full")
        out["q_full third http with an id"] = q.http_infer("q_full", request_id="h7")
        out["q_full third grpc"] = q.grpc_infer("q_full")
        out["q_full third grpc with an id"] = q.grpc_infer("q_full", request_id="r9")
        out["q_full stats while held"] = q.stats("q_full")
        out["q_full answers"] = q.finish(release)
        out["q_full stats"], out["q_full failures"] = q.stats("q_full"), q.failures("q_full")

        # dynamic_batching with max_batch_size 0: no batching, the queue policy applies (max_queue_size 1)
        with urllib.request.urlopen(f"http://{q.http}/v2/models/q_no_batch/config", timeout=30) as answer:
            out["q_no_batch dynamic_batching"] = json.loads(answer.read()).get("dynamic_batching")
        release = q.hold("q_no_batch")
        q.enqueue("q_no_batch", "a", lambda: q.http_infer("q_no_batch"))
        out["q_no_batch second waiting"] = q.http_infer("q_no_batch")
        out["q_no_batch answers"] = q.finish(release)

        # two levels (2 the default, 2 waiting at most; level 1: 1), a timeout of a minute a request may shorten
        release = q.hold("q_levels")
        q.enqueue("q_levels", "low", lambda: q.http_infer("q_levels", {"priority": 2}))
        q.enqueue("q_levels", "default", lambda: q.http_infer("q_levels"))
        out["q_levels level 2 full"] = q.http_infer("q_levels", {"priority": 2})
        out["q_levels priority 7 is the default level"] = q.http_infer("q_levels", {"priority": 7})
        out["q_levels priority 2**64-1 too"] = q.http_infer("q_levels", {"priority": 2**64 - 1})
        out["q_levels level 2 full grpc"] = q.grpc_infer("q_levels", {"priority": ("uint64_param", 2)})
        q.background("high, 20 ms", lambda: q.http_infer("q_levels", {"priority": 1, "timeout": 20_000}))
        wait_until(lambda: "high, 20 ms" in q.answers, "the request past its timeout answered (REJECT: at once)")
        q.enqueue("q_levels", "high", lambda: q.http_infer("q_levels", {"priority": 1}))
        out["q_levels level 1 full"] = q.http_infer("q_levels", {"priority": 1})
        out["q_levels level 1 full grpc"] = q.grpc_infer("q_levels", {"priority": ("int64_param", 1)})
        out["q_levels answers"] = q.finish(release)
        out["q_levels stats"], out["q_levels failures"] = q.stats("q_levels"), q.failures("q_levels")

        # DELAY: a request past its timeout runs after those that are not
        release = q.hold("q_delay")
        late = q.enqueue("q_delay", "late, 1 ms", lambda: q.http_infer("q_delay", {"timeout": 1000}))
        q.enqueue("q_delay", "on time", lambda: q.http_infer("q_delay"))
        q.enqueue("q_delay", "on time grpc", lambda: q.grpc_infer("q_delay"))
        out["q_delay answers"] = q.finish(release, past=late + 0.002)
        out["q_delay stats"] = q.stats("q_delay")

        # a request's own timeout where the policy allows it without a default, where it has a default and does not
        # allow it, and with no policy at all: not applied (it waited past it, and runs)
        for model in ("q_override_only", "q_no_override", "q_plain", "q_unbatched"):
            release = q.hold(model)
            q.enqueue(model, "1 ms", lambda m=model: q.http_infer(m, {"timeout": 1000}))
            last = q.enqueue(model, "1 ms grpc", lambda m=model: q.grpc_infer(m, {"timeout": ("int64_param",
                                                                                                      1000)}))
            out[f"{model} answers"] = q.finish(release, past=last + 0.002)
            out[f"{model} stats after"] = q.stats(model)
            out[f"{model} failures after"] = q.failures(model)
        return json.loads(json.dumps(out))


def _kind_answers(model: str) -> dict[str, Any]:
    """What a model answers to `_kinds`: over HTTP a value that is not an unsigned 64-bit integer refused (500, as
    Triton), over gRPC a kind other than Triton's refused (400) and a negative int64 timeout served (no timeout)."""
    out: dict[str, Any] = {}
    for name in ("priority", "timeout"):
        for label in HTTP_VALUES:
            out[f"{model} http {name} {label}"] = (200, ANSWERED) if label in ("2**64-1", "0", "7") else (
                500, UNSIGNED.format(name))
    out |= {f"{model} grpc priority {label}": ("OK", ANSWERED) for label in ("uint64 3", "int64 max", "int64 0")}
    out |= {f"{model} grpc priority {label}": ("INVALID_ARGUMENT", GRPC_PRIORITY_KIND)
            for label in ("string", "bool", "double")}
    out[f"{model} grpc priority int64 -1"] = ("INVALID_ARGUMENT", "invalid value for 'priority', expected value >= 0.")
    out |= {f"{model} grpc timeout {label}": ("OK", ANSWERED) for label in ("int64 -1", "int64 max", "int64 0")}
    out |= {f"{model} grpc timeout {label}": ("INVALID_ARGUMENT", GRPC_TIMEOUT_KIND)
            for label in ("uint64 3", "string", "bool", "double")}
    served = 12  # (HTTP: 3 of each; gRPC: 3 of each)
    out[f"{model} stats"] = {"success": served, "fail": 0, "queue": served, "execution_count": served}
    out[f"{model} failures"] = NO_FAILURES
    return out


NO_FAILURES = {"BACKEND": "0", "CANCELED": "0", "OTHER": "0", "REJECTED": "0"}
NOT_APPLIED = {"1 ms": [200, 1], "1 ms grpc": ["OK", "answered"], "busy": [200, 0]}
OURS: dict[str, Any] = json.loads(json.dumps({
    **_kind_answers("q_plain"), **_kind_answers("q_unbatched"),
    # requests of other shapes batch together where the input allows a ragged batch; those with another set of
    # inputs do not (an optional input given or not); a batch takes consecutive requests only
    "q_not_ragged answers": {"r0": (200, (1, "X")), "r1": (200, (1, "X")), "r2": (200, (1, "X"))},
    "q_not_ragged executions": (4, {"1": 4}),
    "q_ragged answers": {"r0": (200, (3, "X")), "r1": (200, (3, "X")), "r2": (200, (3, "X"))},
    "q_ragged executions": (2, {"1": 1, "3": 1}),
    "q_optional answers": {"r0": (200, (1, "B,X")), "r1": (200, (1, "X")), "r2": (200, (2, "B,X")),
                           "r3": (200, (2, "B,X"))},
    "q_optional executions": (4, {"1": 3, "2": 1}),
    # (as Triton 2.51: with an optional input declared, a request is refused for its count of inputs only)
    "q_optional without its required input": (200, (1, "B")),
    "q_ragged config input": [{"name": "X", "data_type": "TYPE_FP32", "format": "FORMAT_NONE", "dims": [-1],
                               "is_shape_tensor": False, "allow_ragged_batch": True, "optional": False,
                               "is_non_linear_format_io": False}],
    "q_full third http": (503, FULL.format("<id_unknown>")),
    "q_full third http with an id": (503, FULL.format("h7")),
    "q_full third grpc": ("UNAVAILABLE", FULL.format("<id_unknown>")),
    "q_full third grpc with an id": ("UNAVAILABLE", FULL.format("r9")),
    # a request waiting in the queue is in no count yet; one refused at the door never is
    "q_full stats while held": {"success": 0, "fail": 0, "queue": 0, "execution_count": 0},
    "q_full answers": {"a": (200, 1), "b": ("OK", ANSWERED), "busy": (200, 0)},
    "q_full stats": {"success": 3, "fail": 0, "queue": 3, "execution_count": 3},
    "q_full failures": NO_FAILURES,
    "q_no_batch dynamic_batching": {"preferred_batch_size": [], "max_queue_delay_microseconds": 0,
                                   "preserve_ordering": False, "priority_levels": 0, "default_priority_level": 0,
                                   "default_queue_policy": {"timeout_action": "REJECT",
                                                            "default_timeout_microseconds": 0,
                                                            "allow_timeout_override": False, "max_queue_size": 1},
                                   "priority_queue_policy": {}},
    "q_no_batch second waiting": (503, FULL.format("<id_unknown>")),
    "q_no_batch answers": {"a": (200, 1), "busy": (200, 0)},
    "q_levels level 2 full": (503, FULL.format("<id_unknown>")),
    "q_levels priority 7 is the default level": (503, FULL.format("<id_unknown>")),
    "q_levels priority 2**64-1 too": (503, FULL.format("<id_unknown>")),
    "q_levels level 2 full grpc": ("UNAVAILABLE", FULL.format("<id_unknown>")),
    "q_levels level 1 full": (503, FULL.format("<id_unknown>")),
    "q_levels level 1 full grpc": ("UNAVAILABLE", FULL.format("<id_unknown>")),
    # level 1 first, then level 2 in the order its requests came; the one past its timeout rejected at its deadline
    "q_levels answers": {"busy": (200, 0), "default": (200, 3), "high": (200, 1), "high, 20 ms": (503, EXPIRED),
                         "low": (200, 2)},
    "q_levels stats": {"success": 4, "fail": 1, "queue": 4, "execution_count": 4},
    "q_levels failures": NO_FAILURES | {"REJECTED": "1"},
    "q_delay answers": {"busy": (200, 0), "late, 1 ms": (200, 2), "on time": (200, 1),
                        "on time grpc": ("OK", ANSWERED)},
    "q_delay stats": {"success": 4, "fail": 0, "queue": 4, "execution_count": 4},
    **{f"{model} answers": NOT_APPLIED for model in ("q_override_only", "q_no_override", "q_plain", "q_unbatched")},
    **{f"{model} stats after": {"success": 3, "fail": 0, "queue": 3, "execution_count": 3}
       for model in ("q_override_only", "q_no_override")},
    **{f"{model} stats after": {"success": 15, "fail": 0, "queue": 15, "execution_count": 15}
       for model in ("q_plain", "q_unbatched")},
    **{f"{model} failures after": NO_FAILURES for model in ("q_override_only", "q_no_override", "q_plain",
                                                          "q_unbatched")},
}))


@pytest.fixture(scope="module")
def answers():
    with serve("--model-repository", str(REPOSITORY), *ARGS) as server:
        return _scenario(server.http_url, server.grpc_url, server.metrics_url.split("/")[2])


@pytest.mark.parametrize("case", OURS)
def test_queue_policy_as_a_client_sees_it(answers, case):
    assert answers[case] == OURS[case]


def test_every_case_is_pinned(answers):
    assert sorted(answers) == sorted(OURS)


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_answers_as_the_table_says():
    theirs = asked_of_real_tritonserver(REPOSITORY, _scenario, ARGS, metrics=True)
    assert theirs == OURS
