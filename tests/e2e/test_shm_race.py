"""A call withdrawn while its worker is past its last look for a CANCEL, and the client's next call into the same
output region (issue 40, "A wrong answer"): the client reads its own answer, never the withdrawn call's late write.

The window is held open with the worker's test gate (PYTRITON_TEST_OUTPUT_WRITE_GATE): the worker running the first
call stops between its CANCEL check and its write into the client's region until the test releases it.
"""

from __future__ import annotations

import os
import queue
import uuid
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm

from pytriton.backends.worker import OUTPUT_GATE_ENV
from tests._support.serving import ServerProcess, serve, tensor_args
from tests._support.waits import wait_until

DOUBLE = ["--instances", "2", "--max-batch-size", "64", "--log-level", "debug",
          *tensor_args("input", [("INPUT", "fp32", "-1")]), *tensor_args("output", [("OUTPUT", "fp32", "-1")])]
WAITS = "waits: bytes it reads or writes in a client region may still be written by 1 withdrawn request"
SIZE = 16


def _executions(client: grpcclient.InferenceServerClient) -> int:
    stats = client.get_inference_statistics("double", as_json=True)["model_stats"][0]
    return int(stats.get("execution_count", 0))


def _infer(client, names: dict[str, str], handles: dict, x: np.ndarray, answers: queue.Queue, tag: str):
    shm.set_shared_memory_region(handles["in"], [x])
    inp = grpcclient.InferInput("INPUT", list(x.shape), "FP32")
    inp.set_shared_memory(names["in"], x.nbytes)
    out = grpcclient.InferRequestedOutput("OUTPUT")
    out.set_shared_memory(names["out"], x.nbytes)
    return client.async_infer("double", [inp], callback=lambda result, error: answers.put((tag, result, error)),
                              outputs=[out])


def _regions(client, stack: list) -> tuple[dict[str, str], dict]:
    prefix = f"pt_race_{uuid.uuid4().hex[:8]}"
    names = {role: f"{prefix}_{role}" for role in ("in", "out")}
    handles = {}
    for role, name in names.items():
        handles[role] = shm.create_shared_memory_region(name, "/" + name, SIZE * 4)
        stack.append(handles[role])
        client.register_system_shared_memory(name, "/" + name, SIZE * 4)
    return names, handles


def _race(server: ServerProcess, gate: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A: held at the gate, then cancelled by its client; B: at once, same regions, new values. Returns A's and B's
    inputs and what the output region holds once both executions have ended."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    made: list = []
    try:
        names, handles = _regions(client, made)
        answers: queue.Queue = queue.Queue()
        x_a = np.arange(SIZE, dtype=np.float32).reshape(1, SIZE) + 1000
        x_b = np.arange(SIZE, dtype=np.float32).reshape(1, SIZE) + 5000
        (gate / "hold").touch()
        call_a = _infer(client, names, handles, x_a, answers, "a")
        wait_until(lambda: any(p.name.startswith("held-") for p in gate.iterdir()), "call held at the gate")
        call_a.cancel()  # (RST_STREAM: the server withdraws A before it reads B, sent after it on this channel)
        tag, _, error = answers.get(timeout=30)
        assert tag == "a" and error is not None and "cancel" in str(error).lower(), error
        _infer(client, names, handles, x_b, answers, "b")
        # B either runs at once on the other instance (and answers while A is held), or waits for A's hold
        wait_until(lambda: not answers.empty() or WAITS in server.log, "answer or held-back call")
        (gate / "release").touch()
        tag, _, error = answers.get(timeout=30)
        assert tag == "b" and error is None, error
        wait_until(lambda: _executions(client) >= 2, "end of both executions")  # (A's late write has landed, if any)
        region = np.array(shm.get_contents_as_numpy(handles["out"], np.float32, [1, SIZE]))
        for name in names.values():
            client.unregister_system_shared_memory(name)
        return x_a, x_b, region
    finally:
        for handle in made:
            shm.destroy_shared_memory_region(handle)
        client.close()


def test_a_withdrawn_calls_late_write_never_replaces_the_next_calls_answer(tmp_path: Path):
    gate = tmp_path / "gate"
    gate.mkdir()
    with serve("examples.add_sub:double", *DOUBLE, env={OUTPUT_GATE_ENV: str(gate)}) as server:
        x_a, x_b, region = _race(server, gate)
        assert not np.array_equal(region, x_a * 2), "the output region holds the withdrawn call's late answer"
        np.testing.assert_array_equal(region, x_b * 2)
        assert WAITS in server.log  # B was held back until A's worker had answered
        assert os.listdir(gate) and not (gate / "hold").exists()
