"""Statistics as Triton (2.51, its Python backend) reports them for the same traffic: a model's error response is a
successful request (the model executed it), a model whose execute raises fails its requests but has executed,
batch_stats count executions by their batch size, and a request refused by validation counts nowhere."""

from __future__ import annotations

import concurrent.futures
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.paths import REPO
from tests._support.serving import serve

REPOS = REPO / "tests" / "repositories"


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPOS / "stats")) as s:
        yield s


def infer(url: str, model: str, x: np.ndarray) -> str | None:
    with grpcclient.InferenceServerClient(url) as client:
        tensor = grpcclient.InferInput("X", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        try:
            client.infer(model, [tensor], client_timeout=60)
        except InferenceServerException as exc:
            return exc.message()
        return None


def concurrently(url: str, arrays: list[np.ndarray]) -> list[str | None]:
    with concurrent.futures.ThreadPoolExecutor(len(arrays)) as pool:
        return list(pool.map(lambda x: infer(url, "batched", x), arrays))


def counts(server, model: str) -> dict:
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        stats = client.get_inference_statistics(model, as_json=True)["model_stats"][0]
    inference = {k: int(v.get("count", 0)) for k, v in stats["inference_stats"].items()}
    batches = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]}
    return {"inference_count": int(stats.get("inference_count", 0)),
            "execution_count": int(stats.get("execution_count", 0)), **inference, "batches": batches}


def test_error_responses_and_raising_executions_count_as_triton_counts_them(server):
    assert "raised in execute" in infer(server.grpc_url, "raiser", np.array([1], np.float32))
    assert infer(server.grpc_url, "raiser", np.array([2], np.float32)) == "error response"
    assert infer(server.grpc_url, "raiser", np.array([3], np.float32)) is None
    assert "unexpected shape" in infer(server.grpc_url, "raiser", np.zeros((1, 1), np.float32))
    got = counts(server, "raiser")
    assert got == {"inference_count": 2, "execution_count": 3, "success": 2, "fail": 1, "queue": 2,
                   "compute_input": 2, "compute_infer": 2, "compute_output": 2, "cache_hit": 0, "cache_miss": 0,
                   "batches": {1: 3}}
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    for reason, count in (("BACKEND", 1), ("CANCELED", 0), ("OTHER", 0), ("REJECTED", 0)):  # as Triton's lines
        assert f'nv_inference_request_failure{{model="raiser",reason="{reason}",version="1"}} {count}\n' in text
    assert 'nv_inference_exec_count{model="raiser",version="1"} 3\n' in text


def test_batch_stats_count_executions_by_batch_size(server):
    url = server.grpc_url
    assert concurrently(url, [np.full((1, 1), i, np.float32) for i in range(4)]) == [None] * 4
    assert concurrently(url, [np.full((2, 1), i, np.float32) for i in range(2)]) == [None] * 2
    answers = concurrently(url, [np.full((1, 1), -1, np.float32)] + [np.full((1, 1), 5, np.float32)] * 3)
    assert answers == ["minus one", None, None, None]
    assert "unexpected shape" in infer(url, "batched", np.zeros((1, 2), np.float32))
    got = counts(server, "batched")
    assert got == {"inference_count": 12, "execution_count": 3, "success": 10, "fail": 0, "queue": 10,
                   "compute_input": 10, "compute_infer": 10, "compute_output": 10, "cache_hit": 0, "cache_miss": 0,
                   "batches": {4: 3}}
