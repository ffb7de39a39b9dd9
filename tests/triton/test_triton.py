"""The PyTriton user API end to end: `Triton().bind(...)` with PyTriton's example scenarios, through raw
tritonclient (HTTP and gRPC)."""

from __future__ import annotations

import os
import queue

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from pytriton.exceptions import PyTritonValidationError
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig
from tests._support.ports import FREE_PORTS
from tests.triton import models


@pytest.fixture(scope="module")
def triton():
    config = TritonConfig(http_header_forward_pattern="x-.*", grpc_header_forward_pattern="x-.*", **FREE_PORTS)
    with Triton(config=config) as server:
        f32 = np.float32
        server.bind("add_sub", models.add_sub, inputs=[Tensor(name="a", shape=(-1,), dtype=f32),
                                                       Tensor(name="b", shape=(-1,), dtype=f32)],
                    outputs=[Tensor(name="add", shape=(-1,), dtype=f32), Tensor(name="sub", shape=(-1,), dtype=f32)],
                    config=ModelConfig(max_batch_size=16))
        server.bind("identity", models.identity,
                    inputs=[Tensor(name="floats", shape=(-1,), dtype=np.float64),
                            Tensor(name="texts", shape=(-1,), dtype=bytes)],
                    outputs=[Tensor(name="identity_floats", shape=(-1,), dtype=np.float64),
                             Tensor(name="identity_texts", shape=(-1,), dtype=bytes)],
                    config=ModelConfig(max_batch_size=8))
        for factor in (2, 4):
            server.bind(f"times{factor}", models.times(factor), inputs=[Tensor(name="values", shape=(1,), dtype=f32)],
                        outputs=[Tensor(name="result", shape=(1,), dtype=f32)])
        server.bind("multi", [models.which_instance(i) for i in range(3)],
                    inputs=[Tensor(name="x", shape=(1,), dtype=f32)],
                    outputs=[Tensor(name="instance", shape=(1,), dtype=np.int32),
                             Tensor(name="thread", shape=(1,), dtype=bytes)], config=ModelConfig(max_batch_size=4))
        server.bind("optional", models.add_optional,
                    inputs=[Tensor(name="a", shape=(1,), dtype=f32), Tensor(name="b", shape=(1,), dtype=f32,
                                                                            optional=True),
                            Tensor(name="c", shape=(1,), dtype=f32, optional=True)],
                    outputs=[Tensor(name="sum", shape=(1,), dtype=f32)])
        server.bind("by_mode", models.by_mode, inputs=[Tensor(name="data", shape=(2,), dtype=f32),
                                                       Tensor(name="mode", shape=(1,), dtype=bytes)],
                    outputs=[Tensor(name="out", shape=(2,), dtype=f32)],
                    config=ModelConfig(max_batch_size=8, batcher=DynamicBatcher(max_queue_delay_microseconds=1000)))
        server.bind("words", models.stream_words, inputs=[Tensor(name="count", shape=(1,), dtype=np.int32)],
                    outputs=[Tensor(name="word", shape=(1,), dtype=bytes)],
                    config=ModelConfig(batching=False, decoupled=True))
        server.bind("echo", models.echo_context, inputs=[Tensor(name="x", shape=(1,), dtype=f32)],
                    outputs=[Tensor(name="params", shape=(1,), dtype=bytes)], config=ModelConfig(batching=False))
        server.bind("context", models.with_context, inputs=[Tensor(name="x", shape=(1,), dtype=f32)],
                    outputs=[Tensor(name="name", shape=(1,), dtype=bytes)], config=ModelConfig(batching=False))
        server.bind("unnamed", models.identity, inputs=[Tensor(shape=(1,), dtype=f32)],
                    outputs=[Tensor(shape=(1,), dtype=f32)], config=ModelConfig(batching=False))
        yield server


def http(triton):
    return httpclient.InferenceServerClient(f"127.0.0.1:{triton.ports['http']}")


def grpc(triton):
    return grpcclient.InferenceServerClient(f"127.0.0.1:{triton.ports['grpc']}")


def make_inputs(mod, **arrays):
    inputs = []
    for name, array in arrays.items():
        datatype = "BYTES" if array.dtype == object else {np.float32: "FP32", np.float64: "FP64",
                                                          np.int32: "INT32"}[array.dtype.type]
        tensor = mod.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


@pytest.mark.parametrize("mod", [httpclient, grpcclient], ids=["http", "grpc"])
def test_add_sub(triton, mod):
    client = http(triton) if mod is httpclient else grpc(triton)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.full((3, 4), 2, dtype=np.float32)
    result = client.infer("add_sub", make_inputs(mod, a=a, b=b))
    np.testing.assert_array_equal(result.as_numpy("add"), a + b)
    np.testing.assert_array_equal(result.as_numpy("sub"), a - b)


@pytest.mark.parametrize("mod", [httpclient, grpcclient], ids=["http", "grpc"])
def test_identity_with_bytes_and_strings(triton, mod):
    client = http(triton) if mod is httpclient else grpc(triton)
    floats = np.array([[1.5, -2.25, np.inf]], dtype=np.float64)
    texts = np.array([["zażółć".encode(), b"", b"\x00\xff"]], dtype=object)
    result = client.infer("identity", make_inputs(mod, floats=floats, texts=texts))
    np.testing.assert_array_equal(result.as_numpy("identity_floats"), floats)
    assert result.as_numpy("identity_texts").tolist() == texts.tolist()


def test_multiple_models_in_one_server(triton):
    client = grpc(triton)
    values = np.array([[1.5]], dtype=np.float32)
    for factor in (2, 4):
        result = client.infer(f"times{factor}", make_inputs(grpcclient, values=values))
        assert result.as_numpy("result")[0, 0] == 1.5 * factor
    with pytest.raises(InferenceServerException, match="expecting header 'triton-access-token'"):
        http(triton).get_model_repository_index()  # PyTriton 0.7's default: the repository needs the token
    index = http(triton).get_model_repository_index(headers={"triton-access-token": triton.get_access_token()})
    assert {"times2", "times4", "add_sub"} <= {m["name"] for m in index}


def test_multi_instance_list_of_callables(triton):
    client = http(triton)
    config = client.get_model_config("multi")
    assert config["instance_group"][0]["count"] == 3
    seen_instances = set()
    seen_threads = set()
    results: queue.Queue = queue.Queue()
    gclient = grpc(triton)
    for _ in range(30):
        gclient.async_infer("multi", make_inputs(grpcclient, x=np.ones((1, 1), dtype=np.float32)),
                            callback=lambda result, error: results.put((result, error)))
    for _ in range(30):
        result, error = results.get(timeout=20)
        assert error is None
        seen_instances.add(int(result.as_numpy("instance")[0, 0]))
        seen_threads.add(result.as_numpy("thread")[0, 0])
    assert len(seen_instances) >= 2  # the callables run concurrently, one thread each
    assert len(seen_threads) == len(seen_instances)


def test_optional_inputs_with_fill_optionals(triton):
    client = http(triton)
    a = np.array([[1.0]], dtype=np.float32)
    assert client.infer("optional", make_inputs(httpclient, a=a)).as_numpy("sum")[0, 0] == 111
    b = np.array([[2.0]], dtype=np.float32)
    assert client.infer("optional", make_inputs(httpclient, a=a, b=b)).as_numpy("sum")[0, 0] == 103
    config = client.get_model_config("optional")
    assert [i["optional"] for i in config["input"]] == [False, True, True]


def test_group_by_values_and_first_value(triton):
    client = grpc(triton)
    results: queue.Queue = queue.Queue()
    sent = []
    for i in range(6):
        mode = b"double" if i % 2 else b"triple"
        data = np.array([[i, i + 1]], dtype=np.float32)
        sent.append((data, 2 if i % 2 else 3))
        client.async_infer("by_mode", make_inputs(grpcclient, data=data, mode=np.array([[mode]], dtype=object)),
                           callback=lambda result, error, i=i: results.put((i, result, error)))
    for _ in range(6):
        i, result, error = results.get(timeout=20)
        assert error is None, error
        data, factor = sent[i]
        np.testing.assert_array_equal(result.as_numpy("out"), data * factor)


def test_decoupled_streaming(triton):
    client = grpc(triton)
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    client.async_stream_infer("words", make_inputs(grpcclient, count=np.array([3], dtype=np.int32)),
                              enable_empty_final_response=True)
    words = []
    while True:
        result, error = results.get(timeout=20)
        assert error is None
        if result.get_response().parameters["triton_final_response"].bool_param:
            break
        words.append(result.as_numpy("word")[0])
    client.stop_stream()
    assert words == [b"word-0", b"word-1", b"word-2"]
    with pytest.raises(InferenceServerException, match="decoupled transaction policy"):
        http(triton).infer("words", make_inputs(httpclient, count=np.array([3], dtype=np.int32)))


@pytest.mark.parametrize("mod", [httpclient, grpcclient], ids=["http", "grpc"])
def test_parameters_and_headers_reach_the_callable(triton, mod):
    client = http(triton) if mod is httpclient else grpc(triton)
    result = client.infer("echo", make_inputs(mod, x=np.ones(1, dtype=np.float32)),
                          parameters={"scale": 3, "name": "abc", "flag": True},
                          headers={"x-team": "blue", "other": "ignored"})
    text = result.as_numpy("params")[0].decode()
    assert text == "flag=True;name=abc;scale=3;x-team=blue"


def test_triton_context_and_default_tensor_names(triton):
    client = http(triton)
    result = client.infer("context", make_inputs(httpclient, x=np.ones(1, dtype=np.float32)))
    assert result.as_numpy("name")[0] == b"context"
    config = client.get_model_config("unnamed")
    assert [t["name"] for t in config["input"]] == ["INPUT_1"]
    assert [t["name"] for t in config["output"]] == ["OUTPUT_1"]


def test_rebinding_replaces_a_model(triton):
    triton.bind("times2", models.times(20), inputs=[Tensor(name="values", shape=(1,), dtype=np.float32)],
                outputs=[Tensor(name="result", shape=(1,), dtype=np.float32)])
    result = grpc(triton).infer("times2", make_inputs(grpcclient, values=np.array([[1.0]], dtype=np.float32)))
    assert result.as_numpy("result")[0, 0] == 20
    triton.bind("times2", models.times(2), inputs=[Tensor(name="values", shape=(1,), dtype=np.float32)],
                outputs=[Tensor(name="result", shape=(1,), dtype=np.float32)])


def test_bind_validation():
    t = Triton.__new__(Triton)  # validation happens before any server is involved
    from pytriton.triton import _BoundModel

    with pytest.raises(PyTritonValidationError, match="Output tensors cannot be optional"):
        _BoundModel("m", models.add_sub, [Tensor(shape=(1,), dtype=np.float32)],
                    [Tensor(shape=(1,), dtype=np.float32, optional=True)], 1, ModelConfig(), False)
    with pytest.raises(PyTritonValidationError, match="infer_func"):
        _BoundModel("m", [], [Tensor(shape=(1,), dtype=np.float32)], [Tensor(shape=(1,), dtype=np.float32)], 1,
                    ModelConfig(), False)
    del t


def test_triton_config_validation_and_env(monkeypatch):
    with pytest.raises(PyTritonValidationError, match="has to be allowed"):
        TritonConfig(allow_http=False, allow_grpc=False)
    with pytest.raises(TypeError):
        TritonConfig(8000)  # keyword-only, as in PyTriton
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_GRPC_PORT", "9123")
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_ALLOW_HTTP", "false")
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_LOG_VERBOSE", "2")
    config = TritonConfig.from_env()
    assert (config.grpc_port, config.allow_http, config.log_verbose) == (9123, False, 2)
    assert config.to_dict() == {"grpc_port": 9123, "allow_http": False, "log_verbose": 2}


def test_a_taken_port_is_the_cause_in_the_exception():
    """It said only "the pytriton server did not start (exit code 1); see its log above"."""
    import socket

    from pytriton.exceptions import PyTritonRuntimeError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PyTritonRuntimeError) as info:
            with Triton(config=TritonConfig(http_address="127.0.0.1", http_port=port, grpc_port=0,
                                            metrics_port=0)) as triton:
                triton.bind("identity", models.identity, inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                            outputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))])
                triton.run()
    assert f"cannot listen for HTTP on 127.0.0.1:{port}" in str(info.value)
    assert "address already in use" in str(info.value)


def test_a_declared_callable_and_a_class_target_bind_as_before(triton):
    """@triton_model leaves a callable usable with bind; a class named by import path gets an instance per worker."""
    from pytriton.decorators import batch
    from pytriton.model_config import triton_model

    @triton_model(inputs=[Tensor(name="x", shape=(1,), dtype=np.float32)],
                  outputs=[Tensor(name="y", shape=(1,), dtype=np.float32)], config=ModelConfig(max_batch_size=4))
    @batch
    def declared_double(x):
        return {"y": x * 2}

    triton.bind("declared_double", declared_double, inputs=[Tensor(name="x", shape=(1,), dtype=np.float32)],
                outputs=[Tensor(name="y", shape=(1,), dtype=np.float32)], config=ModelConfig(max_batch_size=4))
    result = grpc(triton).infer("declared_double", make_inputs(grpcclient, x=np.array([[3.0]], dtype=np.float32)))
    assert result.as_numpy("y").tolist() == [[6.0]]
    triton.bind("on_device", "tests.cli_targets.declared:OnDevice",
                inputs=[Tensor(name="IN", shape=(1,), dtype=np.int32)],
                outputs=[Tensor(name="DEVICE", shape=(1,), dtype=bytes),
                         Tensor(name="PID", shape=(1,), dtype=np.int64)], config=ModelConfig(batching=False))
    result = grpc(triton).infer("on_device", make_inputs(grpcclient, IN=np.zeros(1, dtype=np.int32)))
    assert result.as_numpy("DEVICE").tolist() == [b"cpu"] and int(result.as_numpy("PID")[0]) != os.getpid()


def test_a_relative_file_target_is_found_from_the_callers_directory(triton, tmp_path, monkeypatch):
    """`bind("M", "./mymod.py:fn")` names the file as seen from the user's cwd, not the server process's."""
    (tmp_path / "mymod_rel.py").write_text(
        "from pytriton.decorators import batch\n\n\n@batch\ndef infer_fn(x):\n    return {'y': x + 1}\n")
    monkeypatch.chdir(tmp_path)
    triton.bind("relative_file", "./mymod_rel.py:infer_fn", inputs=[Tensor(name="x", shape=(1,), dtype=np.float32)],
                outputs=[Tensor(name="y", shape=(1,), dtype=np.float32)], config=ModelConfig(max_batch_size=4))
    result = grpc(triton).infer("relative_file", make_inputs(grpcclient, x=np.array([[1.0]], dtype=np.float32)))
    assert result.as_numpy("y").tolist() == [[2.0]]


def test_a_target_that_cannot_load_raises_a_pytriton_error_with_the_cause(triton, tmp_path, monkeypatch):
    from pytriton.exceptions import PyTritonRuntimeError

    (tmp_path / "broken_rel.py").write_text("raise RuntimeError('broken on purpose')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PyTritonRuntimeError) as info:
        triton.bind("broken_file", "./broken_rel.py:infer_fn", inputs=[Tensor(name="x", shape=(1,), dtype=np.float32)],
                    outputs=[Tensor(name="y", shape=(1,), dtype=np.float32)])
    message = str(info.value)
    assert message.startswith("model 'broken_file' failed to load: model instance 'broken_file_0_0' failed to start: "
                              "cannot load inference callable ")
    assert "RuntimeError: broken on purpose" in message
    assert type(info.value).__module__ == "pytriton.exceptions"
