"""What an idle worker keeps: a large response gets a shared-memory segment of its own in the worker's arena, and
the server must give it back once the response is sent, not when the worker next gets work."""

from __future__ import annotations

import re
import time

import numpy as np
import tritonclient.grpc as grpcclient

from pytriton.proxy.arena import DEDICATED_BASE
from tests._support.serving import serve, tensor_args
from tests._support.shm import shm_segments_of

IDENTITY = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")])


def _dedicated(pid: int) -> list[str]:
    """Segments of one large tensor each in the arena of process `pid`."""
    found = []
    for name in shm_segments_of({pid}):
        match = re.search(r"_[a-z]+(\d+)$", name)
        if match and int(match.group(1)) >= DEDICATED_BASE:
            found.append(name)
    return found


def test_an_idle_worker_gives_back_the_segment_of_a_large_response():
    """The release of a response's slots rides on the worker's next request; for a dedicated segment that meant an
    idle worker kept the last large tensor (here 20 MiB; any size a client sends) in /dev/shm until then."""
    with serve("tests.models:identity", *IDENTITY) as server:
        (worker,) = server.worker_pids()
        client = grpcclient.InferenceServerClient(server.grpc_url)
        count = 5 << 20  # 20 MiB of FP32: more than a quarter of a 64 MiB arena segment
        tensor = grpcclient.InferInput("IN_X", [count], "FP32")
        tensor.set_data_from_numpy(np.ones(count, dtype=np.float32))
        assert client.infer("identity", [tensor]).as_numpy("OUT_X").sum() == count
        client.close()
        deadline = time.monotonic() + 10
        while _dedicated(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _dedicated(worker) == []
