"""`TritonConfig(cache_config=[...])` and `ModelConfig(response_cache=True)`: the Python API's response cache."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from pytriton.exceptions import PyTritonValidationError
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig
from tests._support.ports import FREE_PORTS

EXECUTIONS: list[int] = []


def counted(requests):
    EXECUTIONS.append(len(requests))
    return [{"y": r["x"] * 2, "calls": np.array([len(EXECUTIONS)], dtype=np.int64)} for r in requests]


def test_a_bad_cache_config_is_refused():
    with pytest.raises(PyTritonValidationError, match="TritonConfig.cache_config: .*size"):
        TritonConfig(cache_config=["local,size=lots"])


def test_bound_model_answers_identical_requests_from_the_cache():
    EXECUTIONS.clear()
    config = TritonConfig(cache_config=["local,size=1048576"], **FREE_PORTS)
    with Triton(config=config) as triton:
        for name, cached in (("cached", True), ("computed", False)):
            triton.bind(name, counted, inputs=[Tensor(name="x", shape=(1,), dtype=np.float32)],
                        outputs=[Tensor(name="y", shape=(1,), dtype=np.float32),
                                 Tensor(name="calls", shape=(1,), dtype=np.int64)],
                        config=ModelConfig(batching=False, response_cache=cached))
        triton.run()
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{triton.ports['grpc']}")
        tensor = grpcclient.InferInput("x", [1], "FP32")
        tensor.set_data_from_numpy(np.array([4], dtype=np.float32))
        assert [int(client.infer("cached", [tensor]).as_numpy("calls")[0]) for _ in range(3)] == [1, 1, 1]
        assert [int(client.infer("computed", [tensor]).as_numpy("calls")[0]) for _ in range(2)] == [2, 3]
        assert len(EXECUTIONS) == 3
        token = {"triton-grpc-protocol-triton-access-token": triton.get_access_token()}
        stats = client.get_inference_statistics("cached", headers=token, as_json=True)["model_stats"][0]
        assert int(stats["inference_stats"]["cache_hit"]["count"]) == 2 and int(stats["execution_count"]) == 1
        client.close()
