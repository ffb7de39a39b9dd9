"""A user program that binds a model into a running server with RemoteTriton (its instance is a thread here),
then waits to be killed: `python -m tests.supervisor.remote_user http://HOST:PORT`."""

from __future__ import annotations

import sys
import time

import numpy as np

from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import RemoteTriton


def sleepy_double(requests):
    """y = 2 x; sleeps x[0] seconds first when x[0] > 1."""
    out = []
    for request in requests:
        x = request["x"]
        if x[0] > 1:
            time.sleep(float(x[0]))
        out.append({"y": x * 2})
    return out


def bind(remote: RemoteTriton, name: str = "remote") -> None:
    remote.bind(name, sleepy_double, inputs=[Tensor(name="x", shape=(4,), dtype=np.float32)],
                outputs=[Tensor(name="y", shape=(4,), dtype=np.float32)], config=ModelConfig(batching=False))


if __name__ == "__main__":
    remote = RemoteTriton(url=sys.argv[1])
    bind(remote)
    remote.connect()
    print("READY", flush=True)
    while True:
        time.sleep(1)
