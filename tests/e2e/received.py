"""What the tests of received segments share (tests/e2e/test_received_segments.py, test_received_attacks.py,
test_received_attacks_http.py): the gated identity model, its data, the server's receive segments in /dev/shm, and
a request held inside the model until the test releases it."""

from __future__ import annotations

import os
import queue
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

from tests._support.serving import tensor_args
from tests._support.waits import wait_until

MIB = 1 << 20
SIZE = 20 * MIB
MODEL = "gated_identity"
IDENTITY = ["--max-batch-size", "0"] + tensor_args("input", [("IN_X", "uint8", "-1"), ("IN_Y", "fp32", "-1")]) \
    + tensor_args("output", [("OUT_X", "uint8", "-1"), ("OUT_Y", "fp32", "-1")])


def receive_segments(server) -> list[str]:
    """The server's receive segments in /dev/shm (named pytriton_<tag>_<server pid>_rcv<id>)."""
    marker = f"_{server.process.pid}_rcv"
    return [name for name in os.listdir("/dev/shm") if name.startswith("pytriton_") and marker in name]


def payload(seed: int, nbytes: int = SIZE) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, nbytes, dtype=np.uint8), rng.random(1000, dtype=np.float32)


def grpc_inputs(x: np.ndarray, y: np.ndarray, x_type: str = "UINT8") -> list:
    inputs = [grpcclient.InferInput("IN_X", [x.size], x_type), grpcclient.InferInput("IN_Y", [y.size], "FP32")]
    inputs[0].set_data_from_numpy(x)
    inputs[1].set_data_from_numpy(y)
    return inputs


class GatedInfer:
    """A request sent now on `client`'s connection whose model waits (after creating `<base>.started`) for
    `<base>.release` before it reads its inputs."""

    def __init__(self, client, seed: int, base: Path, timeout: float | None = None):
        self.x, self.y = payload(seed)
        self._started, self._release = Path(f"{base}.started"), Path(f"{base}.release")
        self._answers: queue.Queue = queue.Queue()
        client.async_infer(MODEL, grpc_inputs(self.x, self.y),
                           lambda result, error: self._answers.put((result, error)),
                           parameters={"started": str(self._started), "release": str(self._release)},
                           client_timeout=timeout)

    def started(self) -> None:
        wait_until(self._started.exists, "the worker to hold the request")

    def release(self) -> None:
        self._release.touch()

    def check(self) -> None:
        result, error = self._answers.get(timeout=60)
        assert error is None, error
        assert result.as_numpy("OUT_X").tobytes() == self.x.tobytes(), "the request's input was overwritten"
        assert result.as_numpy("OUT_Y").tobytes() == self.y.tobytes()


def warm(client, tmp_path: Path, names: tuple[str, ...] = ("w0", "w1")) -> None:
    """Requests with the parameters of `GatedInfer` (one message size): the connection has an idle segment."""
    for seed, name in enumerate(names):
        warm = GatedInfer(client, 90 + seed, tmp_path / name)
        warm.release()
        warm.check()


def digest(base: Path) -> str:
    path = Path(f"{base}.digest")
    wait_until(path.exists, f"the model to read {base.name}'s input")
    return path.read_text()
