"""A replica killed under HTTP and gRPC load (`ray.kill`): Serve replaces it; the requests it had in flight were retried once on
another replica by the ingress (or answered 503, retryable); none hung; afterwards every request succeeds."""

from __future__ import annotations

import threading
import time

import numpy
import pytest

pytest.importorskip("ray")

from tests._support.ray_cluster import WAIT_S, ray, running_replicas, serve, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]

APP = "failover"
REQUEST_TIMEOUT_S = 60.0


def _replicas() -> dict[str, dict]:
    handle = serve.get_deployment_handle("TritonReplica", app_name=APP)
    found: dict[str, dict] = {}
    for _ in range(20):
        info = handle.replica_info.remote().result(timeout_s=WAIT_S)
        found[info["actor_name"]] = info
    return found


def _two(replicas: dict[str, dict]) -> dict[str, dict] | None:
    return replicas if len(replicas) == 2 else None


def test_replica_killed_under_load(ray_cluster):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    import pytriton.ray
    from pytriton.model_config import ModelConfig, Tensor
    from tests.ray.models import slow_add_one

    application = pytriton.ray.from_callable(
        "slow", slow_add_one, inputs=[Tensor(name="x", dtype=numpy.float32, shape=(-1,))],
        outputs=[Tensor(name="y", dtype=numpy.float32, shape=(-1,)), Tensor(name="node", dtype=bytes, shape=(1,))],
        config=ModelConfig(max_batch_size=8), num_replicas=2,
        ray_actor_options={"num_cpus": 0.1, "resources": {"triton": 1}})
    serve.run(application, name=APP, route_prefix="/", blocking=False)
    try:
        wait_for(lambda: running_replicas(APP) == 2 and serve.status().applications[APP].status == "RUNNING",
                 what="2 running replicas")
        before = _replicas()
        assert len(before) == 2
        url = f"{ray_cluster['http']}"
        x = numpy.arange(4, dtype=numpy.float32).reshape(1, 4)
        outcomes: list[str] = []
        lock = threading.Lock()
        stop = threading.Event()

        def load(protocol: str) -> None:
            module = httpclient if protocol == "http" else grpcclient
            client = httpclient.InferenceServerClient(url, network_timeout=REQUEST_TIMEOUT_S) if protocol == "http" \
                else grpcclient.InferenceServerClient(ray_cluster["grpc"])
            try:
                while not stop.is_set():
                    tensor = module.InferInput("x", list(x.shape), "FP32")
                    tensor.set_data_from_numpy(x)
                    try:
                        result = client.infer("slow", [tensor]) if protocol == "http" else \
                            client.infer("slow", [tensor], client_timeout=REQUEST_TIMEOUT_S)
                        outcome = "ok" if numpy.array_equal(result.as_numpy("y"), x + 1) else "wrong"
                    except InferenceServerException as exc:
                        retryable = exc.status() in ("503", "StatusCode.UNAVAILABLE")
                        outcome = f"503: {exc}" if retryable else f"error {exc.status()}: {exc}"
                    except Exception as exc:  # noqa: BLE001 - a timeout or a cut connection: reported below
                        outcome = f"exception: {type(exc).__name__}: {exc}"
                    with lock:
                        outcomes.append(outcome)
            finally:
                client.close()

        threads = [threading.Thread(target=load, args=(protocol,), daemon=True)
                   for protocol in ("http", "http", "http", "http", "grpc", "grpc")]
        for thread in threads:
            thread.start()
        wait_for(lambda: outcomes.count("ok") >= 10, what="requests answered before the kill")
        victim = next(iter(before))
        ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=True)
        killed_at = len(outcomes)
        wait_for(lambda: len(outcomes) >= killed_at + 30, what="requests answered after the kill")
        stop.set()
        for thread in threads:
            thread.join(REQUEST_TIMEOUT_S + 5)
            assert not thread.is_alive(), "a request hung"
        print(f"{len(outcomes)} requests: {outcomes.count('ok')} ok, {len(outcomes) - outcomes.count('ok')} not")
        bad = [o for o in outcomes if o != "ok" and not o.startswith("503")]
        assert not bad, bad[:5]
        counts = serve.get_app_handle(APP).failover_counts.remote().result(timeout_s=WAIT_S)
        print("ingress:", counts)
        # 6 clients (4 HTTP, 2 gRPC) keep both replicas busy: the killed one had requests in flight, which the ingress retried
        assert counts["retried"] >= 1
        assert counts["unavailable"] == sum(o.startswith("503") for o in outcomes)
        wait_for(lambda: running_replicas(APP) == 2, what="the killed replica replaced")
        after = wait_for(lambda: _two(_replicas()), what="2 replicas answering")
        assert victim not in after
        client = httpclient.InferenceServerClient(url, network_timeout=REQUEST_TIMEOUT_S)
        try:
            for _ in range(10):
                tensor = httpclient.InferInput("x", list(x.shape), "FP32")
                tensor.set_data_from_numpy(x)
                numpy.testing.assert_array_equal(client.infer("slow", [tensor]).as_numpy("y"), x + 1)
        finally:
            client.close()
    finally:
        serve.delete(APP)
