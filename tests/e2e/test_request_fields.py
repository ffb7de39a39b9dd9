"""What a Python-backend model sees of its requests (tests/repositories/reqfields): the client's request id, the
sequence id and flags, and `is_cancelled()` once the client left; BLS from threads of the model and from
initialize(), in chains, and bounded by the request's timeout. Checked with the real tritonclient."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve, tensor_args
from tests._support.waits import wait_for_file

REPOS = REPO / "tests" / "repositories"
SERVE_ARGS = ("tests.models:add_sub", "--model-name", "add_sub_callable",
              *tensor_args("input", [("INPUT0", "fp32", "-1"), ("INPUT1", "fp32", "-1")]),
              *tensor_args("output", [("OUTPUT0", "fp32", "-1"), ("OUTPUT1", "fp32", "-1")]),
              "--model-repository", str(REPOS / "reqfields"))
X = np.array([1, 2, 3], dtype=np.float32)


@pytest.fixture(scope="module")
def server():
    with serve(*SERVE_ARGS) as s:
        yield s


def x_input(protocol: str, x: np.ndarray = X):
    tensor = CLIENTS[protocol].InferInput("X", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    return tensor


@pytest.mark.parametrize("protocol", ["grpc", "http"])
@pytest.mark.parametrize(("sequence_id", "start", "end", "flags"),
                         [(42, True, False, 1), ("session-7", False, True, 2), (0, False, False, 0)])
def test_request_id_correlation_id_and_flags_reach_the_model(server, protocol, sequence_id, start, end, flags):
    client = client_for(server, protocol)
    result = client.infer("fields", [x_input(protocol)], request_id="req-17", sequence_id=sequence_id,
                          sequence_start=start, sequence_end=end)
    seen = json.loads(result.as_numpy("FIELDS")[0])
    assert seen == {"request_id": "req-17", "correlation_id": sequence_id, "flags": flags}


def test_without_ids_the_model_sees_empty_ones(server):
    result = client_for(server, "grpc").infer("fields", [x_input("grpc")])
    assert json.loads(result.as_numpy("FIELDS")[0]) == {"request_id": "", "correlation_id": 0, "flags": 0}


def test_is_cancelled_turns_true_when_a_grpc_client_times_out(server, tmp_path):
    """The client gives up after 0.5 s (its deadline): the model, looping on is_cancelled(), sees True and returns;
    its one instance is free again at once (the next request answers well before the model's 30 s loop)."""
    marker = tmp_path / "seen"
    client = client_for(server, "grpc")
    with pytest.raises(InferenceServerException, match="Deadline"):
        client.infer("watch_cancel", [x_input("grpc")], parameters={"marker": str(marker)}, client_timeout=0.5)
    wait_for_file(marker)
    assert marker.read_text() == "cancelled"
    started = time.monotonic()
    result = client.infer("watch_cancel", [x_input("grpc")], parameters={"seconds": 0})
    np.testing.assert_array_equal(result.as_numpy("Y"), X)
    assert time.monotonic() - started < 10


def test_is_cancelled_turns_true_when_a_grpc_async_call_is_cancelled(server, tmp_path):
    marker = tmp_path / "seen"
    client = client_for(server, "grpc")
    answers = []
    future = client.async_infer("watch_cancel", [x_input("grpc")], callback=lambda r, e: answers.append((r, e)),
                                parameters={"marker": str(marker), "started": str(tmp_path / "started")})
    wait_for_file(tmp_path / "started")  # (the request is in the model; cancelling earlier would withdraw it first)
    future.cancel()
    wait_for_file(marker)
    assert marker.read_text() == "cancelled"


def test_bls_from_initialize_and_from_a_thread_pool(server):
    for protocol in ("grpc", "http"):
        result = client_for(server, protocol).infer("threaded_bls", [x_input(protocol)])
        np.testing.assert_array_equal(result.as_numpy("INIT"), [2])
        np.testing.assert_array_equal(result.as_numpy("Y"), sum(2 * (X + i) for i in range(4)))


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_a_model_calls_itself_through_bls_down_a_chain(server, depth):
    result = client_for(server, "grpc").infer("recurse", [x_input("grpc")], parameters={"depth": depth})
    np.testing.assert_array_equal(result.as_numpy("Y"), 2 * X + depth)


def test_bls_timeout_answers_triton_error_and_withdraws_the_request(server):
    client = client_for(server, "grpc")
    started = time.monotonic()
    result = client.infer("bls_timeout", [x_input("grpc")], parameters={"seconds": 20, "timeout_us": 300_000})
    assert time.monotonic() - started < 10
    # (TritonError.INTERNAL and the model's name first, as Triton's stub gives every BLS error)
    assert result.as_numpy("ERROR")[0].decode() == "1: Model double - Error when running inference: Request timeout expired"
    result = client.infer("bls_timeout", [x_input("grpc")], parameters={"seconds": 0, "timeout_us": 5_000_000})
    assert result.as_numpy("ERROR")[0] == b""
    np.testing.assert_array_equal(result.as_numpy("Y"), 2 * X)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_model_sees_the_requests_timeout(server, protocol):
    """request.timeout(): the client's `timeout` parameter or a BLS caller's `timeout` (microseconds; Triton's qa bls
    test.sh looks for the 11 s its identity_fp32_timeout model logs), 0 when none was given; as tritonserver 2.51."""
    client = client_for(server, protocol)
    assert client.infer("seen_timeout", []).as_numpy("TIMEOUT").tolist() == [0]
    assert client.infer("seen_timeout", [], timeout=7_000_000).as_numpy("TIMEOUT").tolist() == [7_000_000]
    seen = client.infer("bls_timeout_seen", [], parameters={"bls_timeout": 11_000_000_000}).as_numpy("TIMEOUT")
    assert seen.tolist() == [11_000_000_000]
    assert client.infer("bls_timeout_seen", [], parameters={"bls_timeout": 0}).as_numpy("TIMEOUT").tolist() == [0]
