"""For the Ray Serve tests (tests/ray): `ray` and `serve` (None where Ray is not installed), waits, replica counts."""

from __future__ import annotations

import socket
import time
import warnings

try:
    with warnings.catch_warnings():  # Ray's own deprecation warnings (pydantic, ...) are not ours to fail on
        warnings.simplefilter("ignore")
        import ray
        from ray import serve
except ModuleNotFoundError:  # the test modules skip (pytest.importorskip)
    ray = serve = None

WAIT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate, timeout_s: float = WAIT_S, what: str = "condition", period_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(period_s)


def running_replicas(app: str, deployment: str = "TritonReplica") -> int:
    status = serve.status().applications.get(app)
    if status is None or deployment not in status.deployments:
        return 0
    return int(status.deployments[deployment].replica_states.get("RUNNING", 0))
