"""Parts of pytriton.ray that need no cluster (still skipped without Ray: the package imports it)."""

from __future__ import annotations

import pickle
import sys

import pytest

pytest.importorskip("ray")


def test_metrics_samples_parsed():
    from pytriton.ray._metrics import parse_samples

    text = "\n".join([
        "# HELP nv_inference_request_success Number of successful inference requests",
        "# TYPE nv_inference_request_success counter",
        'nv_inference_request_success{model="add",version="1"} 20',
        'nv_inference_queue_duration_us{model="a \\"q\\"",version="1"} 1.5e3',
        "nv_cpu_utilization 0.25",
        "garbage line",
    ])
    assert parse_samples(text) == [
        ("nv_inference_request_success", {"model": "add", "version": "1"}, 20.0),
        ("nv_inference_queue_duration_us", {"model": 'a \\"q\\"', "version": "1"}, 1500.0),
        ("nv_cpu_utilization", {}, 0.25),
    ]


def test_local_routes_refused_by_name():
    from pytriton.ray._host import local_route, not_available

    assert local_route("/v2/systemsharedmemory/region/r/register") == "system shared memory"
    assert local_route("/v2/repository/index") == "model repository control"
    assert local_route("/v2/models/add/infer") is None
    assert local_route("/v2/health/ready") is None
    assert "not available behind Ray Serve" in not_available("system shared memory")


def test_decorated_callable_travels_by_name():
    """A @batch function (a wrapt proxy, which pickle refuses) is sent by its import name and found again."""
    import numpy

    from pytriton.model_config import Tensor
    from pytriton.ray import CallableModel
    from tests.ray.models import add_one

    spec = [Tensor(name="x", dtype=numpy.float32, shape=(-1,))]
    model = pickle.loads(pickle.dumps(CallableModel("add", add_one, spec, spec)))
    assert model.infer_func is add_one
    pair = pickle.loads(pickle.dumps(CallableModel("add", [add_one, add_one], spec, spec)))
    assert pair.infer_func == [add_one, add_one]


def test_triton_messages_picklable_by_module_name():
    from tritonclient.grpc import service_pb2

    import pytriton.ray  # noqa: F401 - registers the alias

    assert sys.modules["grpc_service_pb2"] is service_pb2
    request = service_pb2.ModelInferRequest(model_name="add", id="7")
    assert pickle.loads(pickle.dumps(request)) == request


def test_replica_health_follows_model_readiness():
    """The replica's health (Serve's check_health) is its models' readiness: a model that is gone (unloaded, or
    failed) makes it unhealthy, with the model named."""
    import numpy

    from pytriton.model_config import ModelConfig, Tensor
    from pytriton.ray import CallableModel
    from pytriton.ray._host import ReplicaServer
    from tests.ray.models import add_one

    spec = [Tensor(name="x", dtype=numpy.float32, shape=(-1,))]
    out = [Tensor(name="y", dtype=numpy.float32, shape=(-1,)), Tensor(name="node", dtype=bytes, shape=(1,))]
    host = ReplicaServer(models=[CallableModel("add", add_one, spec, out, config=ModelConfig(max_batch_size=4))])
    try:
        assert host.ready() == (True, "")
        runtime = host.server._started()
        runtime.call(runtime.core.unload_model("add"))
        ready, why = host.ready()
        assert not ready and "add" in why, why
    finally:
        host.stop()
