"""pytriton on Ray Serve, on a two-node cluster: Triton's HTTP API through Serve's HTTP proxy (tritonclient.http and
PyTriton's ModelClient), Triton's gRPC service through Serve's gRPC proxy (tritonclient.grpc), and numpy calls
through a deployment handle, answered by replicas on both nodes."""

from __future__ import annotations

import numpy
import pytest

pytest.importorskip("ray")

from tests._support.ray_cluster import WAIT_S, running_replicas, serve, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]

APP = "triton"


@pytest.fixture(scope="module")
def app(ray_cluster):
    import pytriton.ray
    from pytriton.model_config import ModelConfig, Tensor
    from tests.ray.models import add_one

    application = pytriton.ray.from_callable(
        "add", add_one, inputs=[Tensor(name="x", dtype=numpy.float32, shape=(-1,))],
        outputs=[Tensor(name="y", dtype=numpy.float32, shape=(-1,)), Tensor(name="node", dtype=bytes, shape=(1,))],
        config=ModelConfig(max_batch_size=8), num_replicas=2,
        ray_actor_options={"num_cpus": 0.1, "resources": {"triton": 1}})
    serve.run(application, name=APP, route_prefix="/", blocking=False)
    wait_for(lambda: running_replicas(APP) == 2, what="2 running replicas")
    wait_for(lambda: serve.status().applications[APP].status == "RUNNING", what="the application running")
    yield ray_cluster
    serve.delete(APP)


def test_http_tritonclient(app):
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    client = httpclient.InferenceServerClient(app["http"], network_timeout=WAIT_S)
    try:
        assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("add")
        assert client.get_model_metadata("add")["inputs"][0]["name"] == "x"
        assert client.get_model_config("add")["max_batch_size"] == 8
        x = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
        nodes = set()
        for binary in [True, False] * 20:
            tensor = httpclient.InferInput("x", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x, binary_data=binary)
            outputs = [httpclient.InferRequestedOutput("y", binary_data=binary),
                       httpclient.InferRequestedOutput("node", binary_data=binary)]
            result = client.infer("add", [tensor], outputs=outputs)
            numpy.testing.assert_array_equal(result.as_numpy("y"), x + 1)
            node = result.as_numpy("node")[0, 0]  # JSON answers strings, binary answers bytes
            nodes.add(node.decode() if isinstance(node, bytes) else node)
        assert len(nodes) == 2, f"answers came from nodes {nodes}"
        with pytest.raises(InferenceServerException, match="not available behind Ray Serve"):
            client.get_model_repository_index()
        with pytest.raises(InferenceServerException, match="not available behind Ray Serve"):
            client.register_system_shared_memory("r", "/k", 64)
        with pytest.raises(InferenceServerException, match="unknown model"):
            client.infer("nope", [tensor])
    finally:
        client.close()


def test_http_model_client(app):
    from pytriton.client import ModelClient

    x = numpy.ones((3, 4), dtype=numpy.float32)
    with ModelClient(f"http://{app['http']}", "add", init_timeout_s=WAIT_S, inference_timeout_s=WAIT_S) as client:
        result = client.infer_batch(x=x)
    numpy.testing.assert_array_equal(result["y"], x + 1)


def test_grpc_tritonclient(app):
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    client = grpcclient.InferenceServerClient(app["grpc"])
    try:
        assert client.is_server_live() and client.is_model_ready("add")
        assert client.get_model_metadata("add").inputs[0].name == "x"
        assert client.get_model_config("add").config.max_batch_size == 8
        x = numpy.arange(8, dtype=numpy.float32).reshape(2, 4)
        nodes = set()
        for _ in range(40):
            tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            result = client.infer("add", [tensor], client_timeout=WAIT_S)
            numpy.testing.assert_array_equal(result.as_numpy("y"), x + 1)
            nodes.add(result.as_numpy("node")[0, 0])
        assert len(nodes) == 2, f"answers came from nodes {nodes}"
        with pytest.raises(InferenceServerException, match="not available behind Ray Serve") as error:
            client.get_model_repository_index()
        assert error.value.status() == "StatusCode.UNAVAILABLE"
        with pytest.raises(InferenceServerException, match="unknown model") as error:
            client.infer("nope", [tensor], client_timeout=WAIT_S)
    finally:
        client.close()


def test_handle_numpy(app):
    handle = serve.get_app_handle(APP)
    x = numpy.full((2, 5), 7, dtype=numpy.float32)
    nodes = set()
    for _ in range(40):
        result = handle.infer.remote({"x": x}).result(timeout_s=WAIT_S)
        numpy.testing.assert_array_equal(result["y"], x + 1)
        assert isinstance(result["y"], numpy.ndarray)
        nodes.add(result["node"][0, 0])
    assert len(nodes) == 2, f"answers came from nodes {nodes}"


def test_grpc_stream(app):
    """ModelStreamInfer (bidirectional) through Serve's gRPC proxy: each request answered on the stream."""
    import queue

    import tritonclient.grpc as grpcclient

    results: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(app["grpc"])
    try:
        client.start_stream(callback=lambda result, error: results.put((result, error)), stream_timeout=WAIT_S)
        sent = {}
        for i in range(6):
            x = numpy.full((1, 3), i, dtype=numpy.float32)
            tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            client.async_stream_infer("add", [tensor], request_id=str(i))
            sent[str(i)] = x
        tensor = grpcclient.InferInput("x", [1, 3], "FP32")
        tensor.set_data_from_numpy(numpy.zeros((1, 3), dtype=numpy.float32))
        client.async_stream_infer("nope", [tensor], request_id="bad")
        answered = {}
        errors = []
        for _ in range(7):
            result, error = results.get(timeout=WAIT_S)
            if error is not None:
                errors.append(str(error))
                continue
            answered[result.get_response().id] = result.as_numpy("y")
        client.stop_stream()
    finally:
        client.close()
    assert sorted(answered) == sorted(sent)
    for key, x in sent.items():
        numpy.testing.assert_array_equal(answered[key], x + 1)
    assert len(errors) == 1 and "unknown model" in errors[0], errors
