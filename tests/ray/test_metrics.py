"""Each replica's server metrics: its Prometheus text through the replica's `metrics()`, and Ray's metrics export
(the metrics agent of each node) with the replica's label."""

from __future__ import annotations

import urllib.request

import numpy
import pytest

pytest.importorskip("ray")

from tests._support.ray_cluster import WAIT_S, ray, running_replicas, serve, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]

APP = "measured"


def _exported(ports: list[int]) -> str:
    node_ip = ray.util.get_node_ip_address()
    text = ""
    for port in ports:
        try:
            with urllib.request.urlopen(f"http://{node_ip}:{port}/metrics", timeout=10) as response:
                text += response.read().decode()
        except OSError:
            pass
    return text


def test_replica_metrics(ray_cluster):
    import pytriton.ray
    from pytriton.model_config import ModelConfig, Tensor
    from tests.ray.models import add_one

    application = pytriton.ray.from_callable(
        "add", add_one, inputs=[Tensor(name="x", dtype=numpy.float32, shape=(-1,))],
        outputs=[Tensor(name="y", dtype=numpy.float32, shape=(-1,)), Tensor(name="node", dtype=bytes, shape=(1,))],
        config=ModelConfig(max_batch_size=8), num_replicas=2, metrics_export_period_s=1.0,
        ray_actor_options={"num_cpus": 0.1, "resources": {"triton": 1}})
    serve.run(application, name=APP, route_prefix="/", blocking=False)
    try:
        wait_for(lambda: running_replicas(APP) == 2 and serve.status().applications[APP].status == "RUNNING",
                 what="2 running replicas")
        handle = serve.get_app_handle(APP)
        for _ in range(20):
            handle.infer.remote({"x": numpy.ones((1, 2), numpy.float32)}).result(timeout_s=WAIT_S)
        replicas = serve.get_deployment_handle("TritonReplica", app_name=APP)
        text = replicas.metrics.remote().result(timeout_s=WAIT_S)
        assert 'nv_inference_request_success{model="add",version="1"}' in text
        def exported_both() -> str | None:
            text = _exported(ray_cluster["metrics_ports"])
            lines = [line for line in text.splitlines()
                     if "pytriton_nv_inference_request_success" in line and not line.startswith("#")]
            return text if sum(float(line.rsplit(" ", 1)[1]) for line in lines) == 20 else None

        exported = wait_for(exported_both, timeout_s=90.0, period_s=2.0, what="the replicas' metrics in Ray's export")
        lines = [line for line in exported.splitlines()
                 if "pytriton_nv_inference_request_success" in line and not line.startswith("#")]
        replicas_seen = {part for line in lines for part in line.split(",") if part.startswith("replica=")}
        assert len(replicas_seen) == 2, lines
        assert sum(float(line.rsplit(" ", 1)[1]) for line in lines) == 20
    finally:
        serve.delete(APP)
