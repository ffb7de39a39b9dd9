"""A server whose /dev/shm is small (Docker's default 64 MB): a request that does not fit fails with a message
naming /dev/shm and how to enlarge it, and the server and its worker keep serving (no SIGBUS).

The server runs in a private mount namespace (`unshare --mount`, root only) with a 64 MiB tmpfs on /dev/shm;
the test skips where that cannot be set up.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.serving import ServerProcess

MIB = 1024 * 1024
SMALL_SHM = [
    "unshare", "--mount", "--propagation", "private", "sh", "-c",
    'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$0" "$@"',
]  # fmt: skip


def _private_tmpfs_works() -> bool:
    try:
        probe = subprocess.run([*SMALL_SHM[:-1], "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
                               capture_output=True, timeout=10, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _private_tmpfs_works(), reason="needs root to mount a tmpfs in a mount namespace")


@pytest.fixture(scope="module")
def server():
    server = ServerProcess(
        ["examples.add_sub:double", "--input", "INPUT:fp32:-1", "--output", "OUTPUT:fp32:-1"],
        program=[*SMALL_SHM, sys.executable, "-m", "pytriton.cli", "serve"],
    )
    yield server
    assert server.stop() == 0, server.log


def _infer(client: grpcclient.InferenceServerClient, nbytes: int) -> np.ndarray:
    data = np.ones(nbytes // 4, dtype=np.float32)
    tensor = grpcclient.InferInput("INPUT", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    return client.infer("double", [tensor]).as_numpy("OUTPUT")


def test_requests_that_do_not_fit_fail_clearly_and_the_server_keeps_serving(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    workers = server.worker_pids()
    # 40 MiB in fits (the request's segment), 40 MiB more for the output does not: the worker answers the error.
    with pytest.raises(InferenceServerException) as worker_side:
        _infer(client, 40 * MIB)
    message = worker_side.value.message()
    assert "output 'OUTPUT'" in message and "shared memory /dev/shm is full" in message, message
    assert "40.0 MiB (41943040 bytes) needed, 24.0 MiB free of 64.0 MiB" in message and "--shm-size" in message, message
    # 72 MiB cannot even be taken in: the server refuses it before the worker sees it.
    with pytest.raises(InferenceServerException) as server_side:
        _infer(client, 72 * MIB)
    message = server_side.value.message()
    assert worker_side.value.status() == "StatusCode.INTERNAL"
    assert server_side.value.status() == "StatusCode.UNAVAILABLE"
    assert "input 'INPUT'" in message and "shared memory /dev/shm is full" in message, message
    assert "72.0 MiB" in message and "--shm-size" in message, message
    # What fits still works, on the same worker, many times over (the arenas keep the pages of freed slots for
    # reuse: 16 + 4 MiB each in the server's and the worker's arena).
    for nbytes in (24 * MIB, 16 * MIB, 4 * MIB, 16 * MIB, 4 * MIB):
        output = _infer(client, nbytes)
        assert output.shape == (nbytes // 4,) and float(output[0]) == 2.0 and float(output[-1]) == 2.0
    assert server.process.poll() is None
    assert server.worker_pids() == workers, server.log  # no worker was restarted
    assert "exited" not in server.log and "SIGBUS" not in server.log, server.log
