"""Decoupled models: a generator callable streams any number of responses per request over gRPC."""

from __future__ import annotations

import queue
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._support.model_calls import DECOUPLED_COUNT
from tests._support.serving import serve, tensor_args


@pytest.fixture(scope="module", params=["countdown", "async_countdown"])
def server(request):
    with serve(f"tests.models:{request.param}", "--model-name", "countdown", *DECOUPLED_COUNT) as s:
        yield s


def stream(client, counts, empty_final=True):
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    for i, count in enumerate(counts):
        tensor = grpcclient.InferInput("COUNT", [1], "INT32")
        tensor.set_data_from_numpy(np.array([count], dtype=np.int32))
        client.async_stream_infer("countdown", [tensor], request_id=str(i), enable_empty_final_response=empty_final)
    return results


def test_stream_of_responses_with_final_flag(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results = stream(client, [3, 0, 2])
    got: dict[str, list] = {"0": [], "1": [], "2": []}
    finals = 0
    while finals < 3:
        result, error = results.get(timeout=20)
        assert error is None, error
        response = result.get_response()
        final = response.parameters["triton_final_response"].bool_param
        if final:
            finals += 1
            assert len(response.outputs) == 0
        else:
            got[response.id].append(int(result.as_numpy("VALUE")[0]))
    client.stop_stream()
    assert got == {"0": [2, 1, 0], "1": [], "2": [1, 0]}
    stats = client.get_inference_statistics("countdown", as_json=True)["model_stats"][0]
    assert int(stats["inference_stats"]["success"]["count"]) >= 3


def test_without_empty_final_response(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results = stream(client, [2], empty_final=False)
    values = []
    for _ in range(2):
        result, error = results.get(timeout=20)
        assert error is None
        assert result.get_response().parameters["triton_final_response"].bool_param is False
        values.append(int(result.as_numpy("VALUE")[0]))
    client.stop_stream()
    assert values == [1, 0]
    assert results.empty()


def test_unary_and_http_refuse_decoupled(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    tensor = grpcclient.InferInput("COUNT", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], dtype=np.int32))
    with pytest.raises(InferenceServerException) as info:
        client.infer("countdown", [tensor])
    assert info.value.status() == "StatusCode.UNIMPLEMENTED"
    assert info.value.message() == "ModelInfer RPC doesn't support models with decoupled transaction policy"
    http = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("COUNT", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], dtype=np.int32))
    with pytest.raises(InferenceServerException) as info:
        http.infer("countdown", [tensor])
    assert info.value.status() == "501"
    assert info.value.message() == "HTTP end point doesn't support models with decoupled transaction policy"
    assert client.get_model_config("countdown", as_json=True)["config"]["model_transaction_policy"]["decoupled"]


def test_generator_on_a_non_decoupled_model_is_a_clear_error():
    args = tensor_args("input", [("COUNT", "int32", "1")]) + tensor_args("output", [("VALUE", "int32", "1")])
    with serve("tests.models:countdown", *args) as s:
        client = grpcclient.InferenceServerClient(s.grpc_url)
        tensor = grpcclient.InferInput("COUNT", [1], "INT32")
        tensor.set_data_from_numpy(np.array([1], dtype=np.int32))
        with pytest.raises(InferenceServerException, match="returned a generator, but the model is not decoupled"):
            client.infer("countdown", [tensor])


def test_cancelled_stream_stops_the_generator():
    with serve("tests.models:slow_countdown", "--model-name", "countdown", *DECOUPLED_COUNT) as s:
        client = grpcclient.InferenceServerClient(s.grpc_url)
        results = stream(client, [3000])  # 30 s of responses
        for _ in range(3):
            result, error = results.get(timeout=20)
            assert error is None
        client.stop_stream(cancel_requests=True)
        client = grpcclient.InferenceServerClient(s.grpc_url)
        started = time.monotonic()
        results = stream(client, [2])
        values = [int(results.get(timeout=20)[0].as_numpy("VALUE")[0]) for _ in range(2)]
        client.stop_stream()
        assert values == [1, 0]
        assert time.monotonic() - started < 5  # the single instance was freed, not busy for 30 s
