"""Autoscaling on ongoing requests: a sustained queue adds a replica, idleness removes it (short delays)."""

from __future__ import annotations

import threading

import numpy
import pytest

pytest.importorskip("ray")

from tests._support.ray_cluster import WAIT_S, running_replicas, serve, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]

APP = "autoscaled"


def test_autoscaling_up_under_load_and_down_when_idle(ray_cluster):
    import pytriton.ray
    from pytriton.model_config import ModelConfig, Tensor
    from tests.ray.models import slow_add_one

    application = pytriton.ray.from_callable(
        "slow", slow_add_one, inputs=[Tensor(name="x", dtype=numpy.float32, shape=(-1,))],
        outputs=[Tensor(name="y", dtype=numpy.float32, shape=(-1,)), Tensor(name="node", dtype=bytes, shape=(1,))],
        config=ModelConfig(max_batch_size=8),
        autoscaling_config={"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 1,
                            "upscale_delay_s": 1.0, "downscale_delay_s": 3.0, "metrics_interval_s": 0.5,
                            "look_back_period_s": 1.0},
        ray_actor_options={"num_cpus": 0.1, "resources": {"triton": 1}})
    serve.run(application, name=APP, route_prefix="/", blocking=False)
    stop = threading.Event()
    failures: list[str] = []
    threads: list[threading.Thread] = []
    try:
        wait_for(lambda: serve.status().applications[APP].status == "RUNNING", what="the application running")
        assert running_replicas(APP) == 1
        handle = serve.get_app_handle(APP)
        x = numpy.ones((1, 4), dtype=numpy.float32)

        def load() -> None:
            while not stop.is_set():
                try:
                    result = handle.infer.remote({"x": x}).result(timeout_s=WAIT_S)
                    if not numpy.array_equal(result["y"], x + 1):
                        failures.append("wrong answer")
                except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                    failures.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=load, daemon=True) for _ in range(6)]
        for thread in threads:
            thread.start()
        wait_for(lambda: running_replicas(APP) == 2, what="a second replica under load")
        stop.set()
        for thread in threads:
            thread.join(WAIT_S)
            assert not thread.is_alive(), "a request hung"
        assert not failures, failures[:5]
        wait_for(lambda: running_replicas(APP) == 1, what="back to one replica when idle")
    finally:
        stop.set()
        for thread in threads:
            thread.join(WAIT_S)
        serve.delete(APP)
