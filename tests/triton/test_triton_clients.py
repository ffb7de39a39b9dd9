"""The same PyTriton example scenarios, this time through `pytriton.client` (as PyTriton users write them)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pytriton.client import AsyncioModelClient, DecoupledModelClient, FuturesModelClient, ModelClient
from pytriton.client.exceptions import PyTritonClientInferenceServerError
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig
from tests.triton import models

F32 = np.float32


@pytest.fixture(scope="module")
def triton():
    config = TritonConfig(http_port=0, grpc_port=0, metrics_port=0, http_address="127.0.0.1",
                          grpc_address="127.0.0.1", metrics_address="127.0.0.1", http_header_forward_pattern="x-.*")
    with Triton(config=config) as server:
        server.bind("add_sub", models.add_sub, inputs=[Tensor(name="a", shape=(-1,), dtype=F32),
                                                       Tensor(name="b", shape=(-1,), dtype=F32)],
                    outputs=[Tensor(name="add", shape=(-1,), dtype=F32), Tensor(name="sub", shape=(-1,), dtype=F32)],
                    config=ModelConfig(max_batch_size=16))
        server.bind("identity", models.identity, inputs=[Tensor(name="texts", shape=(-1,), dtype=bytes)],
                    outputs=[Tensor(name="identity_texts", shape=(-1,), dtype=bytes)],
                    config=ModelConfig(max_batch_size=8))
        server.bind("multi", [models.which_instance(i) for i in range(2)],
                    inputs=[Tensor(name="x", shape=(1,), dtype=F32)],
                    outputs=[Tensor(name="instance", shape=(1,), dtype=np.int32),
                             Tensor(name="thread", shape=(1,), dtype=bytes)], config=ModelConfig(max_batch_size=4))
        server.bind("optional", models.add_optional,
                    inputs=[Tensor(name="a", shape=(1,), dtype=F32),
                            Tensor(name="b", shape=(1,), dtype=F32, optional=True),
                            Tensor(name="c", shape=(1,), dtype=F32, optional=True)],
                    outputs=[Tensor(name="sum", shape=(1,), dtype=F32)])
        server.bind("by_mode", models.by_mode, inputs=[Tensor(name="data", shape=(2,), dtype=F32),
                                                       Tensor(name="mode", shape=(1,), dtype=bytes)],
                    outputs=[Tensor(name="out", shape=(2,), dtype=F32)],
                    config=ModelConfig(max_batch_size=8, batcher=DynamicBatcher(max_queue_delay_microseconds=2000)))
        server.bind("words", models.stream_words, inputs=[Tensor(name="count", shape=(1,), dtype=np.int32)],
                    outputs=[Tensor(name="word", shape=(1,), dtype=bytes)],
                    config=ModelConfig(batching=False, decoupled=True))
        server.bind("echo", models.echo_context, inputs=[Tensor(name="x", shape=(1,), dtype=F32)],
                    outputs=[Tensor(name="params", shape=(1,), dtype=bytes)], config=ModelConfig(batching=False))
        server.bind("strict_wrong", models.float64_output, inputs=[Tensor(name="x", shape=(1,), dtype=F32)],
                    outputs=[Tensor(name="y", shape=(1,), dtype=F32)], config=ModelConfig(batching=False),
                    strict=True)
        server.bind("lenient_wrong", models.float64_output, inputs=[Tensor(name="x", shape=(1,), dtype=F32)],
                    outputs=[Tensor(name="y", shape=(1,), dtype=F32)], config=ModelConfig(batching=False))
        yield server


def urls(triton):
    return [f"http://127.0.0.1:{triton.ports['http']}", f"grpc://127.0.0.1:{triton.ports['grpc']}"]


@pytest.mark.parametrize("scheme", [0, 1], ids=["http", "grpc"])
def test_add_sub_and_identity(triton, scheme):
    url = urls(triton)[scheme]
    with ModelClient(url, "add_sub", init_timeout_s=30) as client:
        result = client.infer_batch(a=np.ones((2, 3), dtype=F32), b=np.full((2, 3), 2, dtype=F32))
        np.testing.assert_array_equal(result["add"], np.full((2, 3), 3))
        np.testing.assert_array_equal(result["sub"], np.full((2, 3), -1))
        result = client.infer_sample(np.array([5], dtype=F32), np.array([1], dtype=F32))
        assert result["add"].tolist() == [6] and result["sub"].tolist() == [4]
    with ModelClient(url, "identity", init_timeout_s=30) as client:
        texts = np.array([b"a", "zażółć".encode(), b""], dtype=object)
        assert client.infer_sample(texts=texts)["identity_texts"].tolist() == texts.tolist()


def test_multi_instance_with_futures_client(triton):
    with FuturesModelClient(urls(triton)[1], "multi", max_workers=8) as client:
        futures = [client.infer_sample(x=np.ones(1, dtype=F32)) for _ in range(24)]
        instances = {int(f.result(timeout=60)["instance"][0]) for f in futures}
    assert instances <= {0, 1} and instances


def test_optional_inputs_and_grouping(triton):
    with ModelClient(urls(triton)[0], "optional", init_timeout_s=30) as client:
        assert client.infer_sample(a=np.array([1], dtype=F32))["sum"].tolist() == [111]
        assert client.infer_sample(a=np.array([1], dtype=F32), c=np.array([0], dtype=F32))["sum"].tolist() == [11]
    with ModelClient(urls(triton)[1], "by_mode", init_timeout_s=30) as client:
        data = np.array([[1, 2], [3, 4]], dtype=F32)
        modes = np.array([[b"double"], [b"triple"]], dtype=object)
        np.testing.assert_array_equal(client.infer_batch(data=data, mode=modes)["out"], [[2, 4], [9, 12]])


def test_decoupled_with_decoupled_model_client(triton):
    with DecoupledModelClient(urls(triton)[1], "words", init_timeout_s=30) as client:
        words = [r["word"][0] for r in client.infer_sample(count=np.array([3], dtype=np.int32))]
    assert words == [b"word-0", b"word-1", b"word-2"]


def test_parameters_and_headers_with_model_client(triton):
    with ModelClient(urls(triton)[0], "echo", init_timeout_s=30) as client:
        result = client.infer_sample(x=np.ones(1, dtype=F32), parameters={"level": 2}, headers={"x-user": "ann"})
    assert result["params"][0] == b"level=2;x-user=ann"


def test_asyncio_client(triton):
    async def main():
        async with AsyncioModelClient(urls(triton)[1], "add_sub", init_timeout_s=30) as client:
            return await client.infer_sample(a=np.array([1.5], dtype=F32), b=np.array([0.5], dtype=F32))

    assert asyncio.run(main())["add"].tolist() == [2.0]


def test_strict_mode(triton):
    with ModelClient(urls(triton)[0], "strict_wrong", init_timeout_s=30) as client:
        with pytest.raises(PyTritonClientInferenceServerError, match="output 'y' of model 'strict_wrong' has datatype "
                                                                     "FP64"):
            client.infer_sample(x=np.ones(1, dtype=F32))
    with ModelClient(urls(triton)[0], "lenient_wrong", init_timeout_s=30) as client:
        result = client.infer_sample(x=np.ones(1, dtype=F32))  # non-strict: FP64 -> declared FP32
    assert result["y"].dtype == np.float32 and result["y"].tolist() == [2.0]
