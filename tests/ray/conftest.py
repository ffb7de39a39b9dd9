"""A two-node Ray cluster for the Ray Serve tests (small: the machine is shared), shut down after the module."""

from __future__ import annotations

import os
import pathlib
import socket
import time
import warnings

import pytest

try:
    with warnings.catch_warnings():  # Ray's own deprecation warnings (pydantic, ...) are not ours to fail on
        warnings.simplefilter("ignore")
        import ray
        from ray import serve
except ModuleNotFoundError:  # the test modules skip (pytest.importorskip)
    ray = serve = None

ROOT = pathlib.Path(__file__).resolve().parents[2]
WAIT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def ray_cluster():
    """Two nodes, one CPU and one `triton` slot each: a replica asking for the slot gets a node of its own."""
    from ray.cluster_utils import Cluster

    old_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), old_path) if p)
    metrics_ports = [free_port(), free_port()]
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"triton": 1}, "include_dashboard": False, "metrics_export_port": metrics_ports[0]})
    try:
        cluster.add_node(num_cpus=1, resources={"triton": 1}, metrics_export_port=metrics_ports[1])
        cluster.wait_for_nodes(timeout=WAIT_S)
        ray.init(address=cluster.address, log_to_driver=False)
        http_port, grpc_port = free_port(), free_port()
        import pytriton.ray

        serve.start(http_options={"host": "127.0.0.1", "port": http_port},
                    grpc_options=pytriton.ray.grpc_options(port=grpc_port))
        yield {"http": f"127.0.0.1:{http_port}", "grpc": f"127.0.0.1:{grpc_port}", "cluster": cluster,
               "metrics_ports": metrics_ports}
    finally:
        try:
            if ray.is_initialized():
                try:
                    serve.shutdown()
                finally:
                    ray.shutdown()
        finally:
            cluster.shutdown()
            if old_path is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old_path


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
