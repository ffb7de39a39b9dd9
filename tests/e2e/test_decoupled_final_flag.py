"""A decoupled Python-backend model's final flag over gRPC, as Triton sends it: on the last response when the model
sent that response with TRITONSERVER_RESPONSE_COMPLETE_FINAL (no empty final after it, even when the client asks for
empty final responses), as an empty response when the model sent the flag alone and the client asked for it; and
responses stream while `execute` still runs."""

from __future__ import annotations

import queue
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests._support.paths import REPO
from tests._support.serving import serve

REPOS = REPO / "tests" / "repositories"


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPOS / "inprocess")) as s:
        yield s


def stream(server, model: str, values: list[int], empty_final: bool, wait_s: float = 0.5) -> list[tuple]:
    """(OUT values, triton_final_response, seconds since the request) of each response of one streamed request."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error, time.monotonic())))
    try:
        tensor = grpcclient.InferInput("IN", [len(values)], "INT32")
        tensor.set_data_from_numpy(np.array(values, dtype=np.int32))
        started = time.monotonic()
        client.async_stream_infer(model, [tensor], enable_empty_final_response=empty_final)
        got = []
        while True:
            try:
                result, error, when = results.get(timeout=wait_s if got and not empty_final else 20)
            except queue.Empty:
                return got  # (no empty final asked for: nothing more comes)
            assert error is None, error
            response = result.get_response()
            final = response.parameters["triton_final_response"].bool_param
            out = result.as_numpy("OUT")
            got.append((None if out is None else int(out[0]), final, when - started))
            if final:
                return got
    finally:
        client.stop_stream()


@pytest.mark.parametrize("empty_final", [True, False])
def test_last_response_sent_with_the_flag_carries_it(server, empty_final):
    got = stream(server, "count_final", [3], empty_final)
    assert [(value, final) for value, final, _ in got] == [(1, False), (2, False), (3, True)]


def test_flag_alone_is_an_empty_final_response_when_asked_for(server):
    assert [(value, final) for value, final, _ in stream(server, "count_final", [0], True)] == [(None, True)]
    got = stream(server, "slow_stream", [5, 6], True)
    assert [(value, final) for value, final, _ in got] == [(5, False), (6, False), (None, True)]


def test_responses_stream_while_execute_runs(server):
    got = stream(server, "slow_stream", [1, 2, 3, 4], True)
    first, last = got[0][2], got[-1][2]
    assert last - first > 0.5  # 0.2 s apart, as sent (not all at once when execute returns)
