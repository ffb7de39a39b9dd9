"""Clients that give up (short deadlines, cancelled streams) must never wedge a model (issue 13, item 1)."""

from __future__ import annotations

import re
import threading
import time
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.conftest import serve, tensor_args

ADD_SUB = tensor_args("input", [("INPUT0", "int32", "16"), ("INPUT1", "int32", "16")]) + tensor_args(
    "output", [("OUTPUT0", "int32", "16"), ("OUTPUT1", "int32", "16")]
)


def _inputs() -> list:
    tensors = []
    for name in ("INPUT0", "INPUT1"):
        tensor = grpcclient.InferInput(name, [16], "INT32")
        tensor.set_data_from_numpy(np.arange(16, dtype=np.int32))
        tensors.append(tensor)
    return tensors


def _pending(metrics_url: str) -> float:
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    values = re.findall(r"^nv_inference_pending_request_count\{[^}]*\} (\S+)$", text, re.M)
    return sum(float(v) for v in values)


def deadline_storm(url: str, model: str, seconds: float, threads: int = 16) -> dict[str, int]:
    """`threads` clients call `model` with deadlines of 0.5-2 ms for `seconds`; counts what they saw."""
    stop = time.monotonic() + seconds
    counts = {"ok": 0, "deadline": 0, "other": 0}
    lock = threading.Lock()
    others: list[str] = []

    def run(index: int) -> None:
        client = grpcclient.InferenceServerClient(url)
        inputs = _inputs()
        timeouts = (0.0005, 0.001, 0.0015, 0.002)
        n = 0
        while time.monotonic() < stop:
            n += 1
            try:
                client.infer(model, inputs, client_timeout=timeouts[(index + n) % 4])
                kind = "ok"
            except InferenceServerException as exc:
                kind = "deadline" if "Deadline" in str(exc) or "DEADLINE" in str(exc.status()) else "other"
                if kind == "other":
                    others.append(str(exc))
            with lock:
                counts[kind] += 1
        client.close()

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not others, others[:5]
    return counts


def test_deadline_storm_leaves_the_model_working():
    with serve("examples.add_sub:add_sub", "--instances", "2", *ADD_SUB) as server:
        counts = deadline_storm(server.grpc_url, "add_sub", seconds=6)
        assert counts["deadline"] > 0, counts
        client = grpcclient.InferenceServerClient(server.grpc_url)
        for _ in range(50):
            result = client.infer("add_sub", _inputs(), client_timeout=10)
            assert (result.as_numpy("OUTPUT0") == 2 * np.arange(16)).all()
        deadline = time.monotonic() + 10
        while _pending(server.metrics_url) != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _pending(server.metrics_url) == 0
