"""A two-node Ray cluster for the Ray Serve tests (small: the machine is shared), shut down after the module."""

from __future__ import annotations

import os

import pytest

from tests._support.paths import REPO
from tests._support.ray_cluster import WAIT_S, free_port, ray, serve


@pytest.fixture(scope="session")
def ray_cluster():
    """Two nodes, one CPU and one `triton` slot each: a replica asking for the slot gets a node of its own."""
    from ray.cluster_utils import Cluster

    old_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), old_path) if p)
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

