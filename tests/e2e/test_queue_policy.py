"""A model's queue policy through the real tritonclient, configured each of the three ways (PyTriton's bind, the CLI's
flags, a repository's config.pbtxt): priorities order what waits, a full priority level refuses at once, a request's
own timeout (where the policy allows it) rejects it while it waits, and DELAY runs late requests after the others.

The model runs one request at a time and holds the first until the test creates a file, so what waits is known."""

from __future__ import annotations

import queue
import re
import textwrap
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from pytriton.model_config import DynamicBatcher, ModelConfig, QueuePolicy, Tensor, TimeoutAction
from pytriton.triton import Triton, TritonConfig
from tests._support.ports import FREE_PORTS
from tests._support.serving import serve, tensor_args
from tests._support.waits import wait_until
from tests.models import gated_order

LONG_US = 60_000_000
QUEUE_FULL = "[request id: %s] Exceeds maximum queue size"  # tritonserver 2.51's words
# Two levels (2 the default); each holds 2 waiting requests; a request may ask for a timeout shorter than a minute.
CLI_FLAGS = ["--max-batch-size", "1", "--priority-levels", "2", "--default-priority-level", "2", "--max-queue-size",
             "2", "--default-timeout-us", str(LONG_US), "--allow-timeout-override", "--timeout-action", "REJECT",
             *tensor_args("input", [("INPUT", "fp32", "1")]), *tensor_args("output", [("ORDER", "int64", "1")])]
POLICY = QueuePolicy(max_queue_size=2, default_timeout_microseconds=LONG_US, allow_timeout_override=True)
CONFIG_PBTXT = f"""
backend: "python"
max_batch_size: 1
input [{{ name: "INPUT" data_type: TYPE_FP32 dims: [1] }}]
output [{{ name: "ORDER" data_type: TYPE_INT64 dims: [1] }}]
dynamic_batching {{
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy {{ max_queue_size: 2 default_timeout_microseconds: {LONG_US} allow_timeout_override: true }}
}}
"""
MODEL_PY = """
import json, os, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.runs = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            parameters = json.loads(request.parameters())
            if "started" in parameters:
                open(parameters["started"], "w").close()
            deadline = time.monotonic() + 30
            while "release" in parameters and not os.path.exists(parameters["release"]) and time.monotonic() < deadline:
                time.sleep(0.01)
            self.runs += 1
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("ORDER", np.array([[self.runs]], np.int64))]))
        return responses
"""


def _inputs(module=grpcclient) -> list:
    tensor = module.InferInput("INPUT", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 1), dtype=np.float32))
    return [tensor]


def _pending(metrics_url: str) -> float:
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    return sum(float(v) for v in re.findall(r"^nv_inference_pending_request_count\{[^}]*\} (\S+)$", text, re.M))


def _failures(metrics_url: str, model: str) -> dict[str, float]:
    """nv_inference_request_failure of `model` by reason."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    pattern = rf'^nv_inference_request_failure\{{model="{model}",reason="(\w+)",version="[^"]*"\}} (\S+)$'
    return {reason: float(value) for reason, value in re.findall(pattern, text, re.M)}


class Client:
    """gRPC and HTTP clients of one model, and a queue of the answers to what was sent asynchronously."""

    def __init__(self, grpc_url: str, http_url: str, metrics_url: str, model: str, tmp_path: Path):
        self.grpc = grpcclient.InferenceServerClient(grpc_url)
        self.http = httpclient.InferenceServerClient(http_url)
        self.metrics_url, self.model, self.tmp_path = metrics_url, model, tmp_path
        self.answers: queue.Queue = queue.Queue()
        self.headers: dict[str, str] = {}  # for the statistics (bound models: Triton()'s access token)

    def send(self, label: str, **kwargs) -> None:
        def done(result, error) -> None:
            self.answers.put((label, result, error))

        self.grpc.async_infer(self.model, _inputs(), callback=done, **kwargs)

    def hold(self) -> Path:
        """Send a request that runs until the returned file exists."""
        started, release = self.tmp_path / "started", self.tmp_path / "release"
        self.send("busy", parameters={"started": str(started), "release": str(release)})
        wait_until(started.exists, "the first request starting")
        return release

    def wait_pending(self, count: int) -> None:
        wait_until(lambda: _pending(self.metrics_url) == count, f"{count} requests waiting")

    def refused(self, protocol: str, **kwargs) -> InferenceServerException:
        with pytest.raises(InferenceServerException) as info:
            if protocol == "grpc":
                self.grpc.infer(self.model, _inputs(), **kwargs)
            else:
                self.http.infer(self.model, _inputs(httpclient), **kwargs)
        return info.value

    def orders(self, count: int) -> dict[str, int]:
        out = {}
        for _ in range(count):
            label, result, error = self.answers.get(timeout=30)
            assert error is None, (label, str(error))
            out[label] = int(result.as_numpy("ORDER")[0][0])
        return out

    def close(self) -> None:
        self.grpc.close()
        self.http.close()


def exercise(client: Client) -> None:
    """The policy of CLI_FLAGS (= POLICY = CONFIG_PBTXT), through gRPC and HTTP."""
    stats_before = _stats(client)
    failures_before = _failures(client.metrics_url, client.model)
    release = client.hold()
    client.send("low", priority=2)
    client.send("default")  # priority 0: the default level, 2
    client.wait_pending(2)
    for protocol, status in (("grpc", "StatusCode.UNAVAILABLE"), ("http", "503")):  # level 2 holds 2 already
        error = client.refused(protocol, priority=2)
        assert error.status() == status and error.message() == QUEUE_FULL % "<id_unknown>", error
    error = client.refused("grpc", request_id="r9")
    assert error.message() == QUEUE_FULL % "r9", error
    client.send("high", priority=1)  # level 1 has room of its own, and goes first
    client.wait_pending(3)
    for protocol, status in (("grpc", "StatusCode.UNAVAILABLE"), ("http", "503")):  # its own timeout: 50 ms
        error = client.refused(protocol, priority=1, timeout=50_000)
        assert error.status() == status and error.message() == "Request timeout expired", error
    assert not release.exists()  # (the rejections came while the instance was held all along)
    release.touch()
    orders = client.orders(4)
    assert orders["busy"] < orders["high"] < orders["low"] < orders["default"], orders
    stats = _stats(client)
    # As Triton: a request rejected in the queue counts as a failure; one refused at the door (queue full) does not.
    assert stats["fail"] - stats_before["fail"] == 2 and stats["success"] - stats_before["success"] == 4, stats
    failures = _failures(client.metrics_url, client.model)  # ... with Triton's reason: REJECTED
    assert {reason: failures[reason] - failures_before.get(reason, 0) for reason in failures} == {
        "REJECTED": 2, "CANCELED": 0, "BACKEND": 0, "OTHER": 0}, failures


def _stats(client: Client) -> dict[str, int]:
    stats = client.grpc.get_inference_statistics(client.model, headers=client.headers, as_json=True)
    stats = stats["model_stats"][0]["inference_stats"]
    return {kind: int(stats[kind].get("count", 0)) for kind in ("success", "fail")}


def test_a_request_cancelled_while_queued_counts_as_a_canceled_failure(tmp_path):
    with serve("tests.models:gated_order", "--model-name", "gated", *CLI_FLAGS) as server:
        client = Client(server.grpc_url, server.http_url, server.metrics_url, "gated", tmp_path)
        release = client.hold()
        with pytest.raises(InferenceServerException, match="Deadline Exceeded"):
            client.grpc.infer("gated", _inputs(), client_timeout=0.5)  # the server sees the call cancelled
        wait_until(lambda: _failures(server.metrics_url, "gated").get("CANCELED") == 1, "a CANCELED failure")
        release.touch()
        client.orders(1)
        stats = _stats(client)
        assert stats == {"success": 1, "fail": 1}, stats
        assert _failures(server.metrics_url, "gated") == {"REJECTED": 0, "CANCELED": 1, "BACKEND": 0, "OTHER": 0}
        client.close()


def test_a_request_the_client_cancels_while_queued_counts_as_a_canceled_failure(tmp_path):
    """The client resets the call (RST_STREAM CANCEL) while its request waits: it is withdrawn and never runs, counted
    as Triton counts it; the server answers the next requests."""
    with serve("tests.models:gated_order", "--model-name", "gated", *CLI_FLAGS) as server:
        client = Client(server.grpc_url, server.http_url, server.metrics_url, "gated", tmp_path)
        release = client.hold()
        cancelled: queue.Queue = queue.Queue()
        call = client.grpc.async_infer("gated", _inputs(), callback=lambda result, error: cancelled.put(error))
        client.wait_pending(1)
        call.cancel()
        assert "CANCELLED" in str(cancelled.get(timeout=30))
        wait_until(lambda: _failures(server.metrics_url, "gated").get("CANCELED") == 1, "a CANCELED failure")
        client.wait_pending(0)
        release.touch()
        assert client.orders(1) == {"busy": 1}  # the held request; the cancelled one never ran
        assert int(client.grpc.infer("gated", _inputs()).as_numpy("ORDER")[0][0]) == 2
        assert _stats(client) == {"success": 2, "fail": 1}
        client.close()


def test_the_cli_flags(tmp_path):
    with serve("tests.models:gated_order", "--model-name", "gated", *CLI_FLAGS) as server:
        config = grpcclient.InferenceServerClient(server.grpc_url).get_model_config("gated", as_json=True)["config"]
        batching = config["dynamic_batching"]
        assert batching["priority_levels"] == "2" and batching["default_priority_level"] == "2"
        assert batching["default_queue_policy"]["max_queue_size"] == 2
        client = Client(server.grpc_url, server.http_url, server.metrics_url, "gated", tmp_path)
        exercise(client)
        client.close()


def test_a_repository_config(tmp_path):
    model = tmp_path / "repo" / "gated"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG_PBTXT)
    (model / "1" / "model.py").write_text(textwrap.dedent(MODEL_PY))
    with serve("--model-repository", str(tmp_path / "repo")) as server:
        client = Client(server.grpc_url, server.http_url, server.metrics_url, "gated", tmp_path)
        exercise(client)
        client.close()


def _bind(triton: Triton, name: str, batcher: DynamicBatcher) -> None:
    triton.bind(name, gated_order, inputs=[Tensor(name="INPUT", shape=(1,), dtype=np.float32)],
                outputs=[Tensor(name="ORDER", shape=(1,), dtype=np.int64)],
                config=ModelConfig(max_batch_size=1, batcher=batcher))


def _bound_client(triton: Triton, name: str, tmp_path: Path) -> Client:
    ports = triton.ports
    client = Client(f"127.0.0.1:{ports['grpc']}", f"127.0.0.1:{ports['http']}",
                    f"http://127.0.0.1:{ports['metrics']}/metrics", name, tmp_path)
    client.headers = {"triton-grpc-protocol-triton-access-token": triton.get_access_token() or ""}
    return client


def test_bind(tmp_path):
    with Triton(config=TritonConfig(**FREE_PORTS)) as triton:
        _bind(triton, "gated", DynamicBatcher(priority_levels=2, default_priority_level=2, default_queue_policy=POLICY))
        triton.run()
        client = _bound_client(triton, "gated", tmp_path)
        exercise(client)
        client.close()


def test_delay_runs_requests_past_their_timeout_after_the_others_and_override_needs_permission(tmp_path):
    delay = QueuePolicy(default_timeout_microseconds=LONG_US, allow_timeout_override=True,
                        timeout_action=TimeoutAction.DELAY)
    fixed = QueuePolicy(default_timeout_microseconds=LONG_US)  # a request's own timeout is ignored
    with Triton(config=TritonConfig(**FREE_PORTS)) as triton:
        _bind(triton, "delayed", DynamicBatcher(default_queue_policy=delay))
        _bind(triton, "fixed", DynamicBatcher(default_queue_policy=fixed))
        triton.run()
        for name, expected in (("delayed", ["busy", "waits", "late"]), ("fixed", ["busy", "late", "waits"])):
            client = _bound_client(triton, name, tmp_path / name)
            (tmp_path / name).mkdir()
            release = client.hold()
            client.send("late", timeout=1000)  # 1 ms
            client.send("waits")
            client.wait_pending(2)
            time.sleep(0.01)  # the 1 ms of "late" have passed (it was queued before the gauge showed 2)
            release.touch()
            orders = client.orders(3)
            assert sorted(orders, key=orders.__getitem__) == expected, (name, orders)
            client.close()
