"""BLS: Python-backend models (tests/repositories/bls) calling other models of the server with pb_utils
`InferenceRequest.exec()`, `async_exec()` and `exec(decoupled=True)`; a repository model and a callable as callees;
unknown models, failing callees and a model calling itself answered with clear errors; checked with the real
tritonclient over gRPC and HTTP."""

from __future__ import annotations

import concurrent.futures
import os
import re
import signal

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve, tensor_args
from tests._support.waits import wait_for_file, wait_until

REPOS = REPO / "tests" / "repositories"


CALLABLE_ARGS = ["--model-name", "add_sub_callable", "--max-batch-size", "8",
                 *tensor_args("input", [("INPUT0", "fp32", "-1"), ("INPUT1", "fp32", "-1")]),
                 *tensor_args("output", [("OUTPUT0", "fp32", "-1"), ("OUTPUT1", "fp32", "-1")])]
SERVE_ARGS = ("tests.models:add_sub", *CALLABLE_ARGS, "--model-repository", str(REPOS / "models"),
              "--model-repository", str(REPOS / "bls"))


@pytest.fixture(scope="module")
def server():
    """The `models` and `bls` repositories beside a callable (tests.models:add_sub, as add_sub_callable)."""
    with serve(*SERVE_ARGS) as s:
        yield s


def infer(server, protocol: str, model: str, a: np.ndarray, b: np.ndarray, **parameters):
    client = client_for(server, protocol)
    inputs = []
    for name, array in (("INPUT0", a), ("INPUT1", b)):
        tensor = CLIENTS[protocol].InferInput(name, list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return client.infer(model, inputs, parameters=parameters or None)


A = np.arange(8, dtype=np.float32).reshape(2, 4)
B = np.full((2, 4), 3, dtype=np.float32)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
@pytest.mark.parametrize("target", ["add_sub", "add_sub_callable"])
def test_exec_calls_a_repository_model_and_a_callable(server, protocol, target):
    result = infer(server, protocol, "bls_sync", A, B, target=target)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_large_tensors_travel_through_shared_memory(server, protocol):
    """1 MiB inputs and outputs: past the inline limit, both ways go through the arenas (and come back each time)."""
    a = np.random.default_rng(0).random((1, 1 << 18), dtype=np.float32)
    b = np.ones_like(a)
    for _ in range(20):
        result = infer(server, protocol, "bls_sync", a, b, target="add_sub_callable")
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_async_exec_from_async_execute(server, protocol):
    result = infer(server, protocol, "bls_async", A, B)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_exec_decoupled_iterates_over_the_stream(server, protocol):
    client = client_for(server, protocol)
    values = np.array([4, 5, 6], dtype=np.int32)
    tensor = CLIENTS[protocol].InferInput("IN", [3], "INT32")
    tensor.set_data_from_numpy(values)
    result = client.infer("bls_decoupled", [tensor])
    assert result.as_numpy("SUM").tolist() == [15]
    assert result.as_numpy("COUNT").tolist() == [4]  # three responses and the empty final one


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_unknown_model_is_an_error_response(server, protocol):
    with pytest.raises(InferenceServerException) as info:
        infer(server, protocol, "bls_sync", A, B, target="no_such_model")
    # (Triton 2.51's stub's words and code, INTERNAL, whatever the callee's error was: tests/e2e/test_triton_parity.py)
    assert ("[code 1] Model no_such_model - Error when running inference: Failed for execute the inference request. "
            "Model 'no_such_model' is not ready.") in info.value.message()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_callee_error_is_an_error_response(server, protocol):
    with pytest.raises(InferenceServerException) as info:
        infer(server, protocol, "bls_sync", A, B, target="fails")
    message = info.value.message()
    assert "[code 1]" in message and "fails on purpose" in message, message


def test_a_model_calling_itself_with_one_instance_fails_at_once(server):
    with pytest.raises(InferenceServerException) as info:
        infer(server, "grpc", "bls_sync", A, B, target="bls_sync")
    message = info.value.message()
    assert ("BLS call cycle: 'bls_sync' -> 'bls_sync': model 'bls_sync' has no free instance (instance 'bls_sync_0_0' "
            "waits for this call)") in message, message


def test_the_callee_counts_the_request_in_its_statistics(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)

    def successes() -> int:
        stats = client.get_inference_statistics("add_sub_callable", as_json=True)["model_stats"][0]
        return int(stats["inference_stats"]["success"].get("count", 0))

    before = successes()
    infer(server, "grpc", "bls_sync", A, B, target="add_sub_callable")
    assert successes() == before + 1


def test_server_still_serves_after_the_errors(server):
    result = infer(server, "grpc", "bls_sync", A, B)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)


def test_a_caller_killed_mid_call_fails_its_request_and_the_model_serves_on(server, tmp_path):
    """The BLS model's worker dies while its request waits in `gated`: its client gets an error, the callee's answer
    is dropped when it comes, and the restarted worker serves the next request."""
    started, release, pid_file = tmp_path / "started", tmp_path / "release", tmp_path / "pid"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(infer, server, "grpc", "bls_sync", A, B, target="gated", started=str(started),
                              release=str(release), pid_file=str(pid_file))
        wait_for_file(started)
        killed = int(pid_file.read_text())
        os.kill(killed, signal.SIGKILL)
        with pytest.raises(InferenceServerException) as info:
            pending.result(30)
        assert "bls_sync" in info.value.message()
    release.touch()
    restarted = re.compile(rf"model instance 'bls_sync[^']*' started \(pid (?!{killed}\))\d+\)")
    wait_until(lambda: restarted.search(server.log), "the killed worker's replacement started")
    result = infer(server, "grpc", "bls_sync", A, B)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)


def test_a_server_stopped_mid_call_exits_cleanly(tmp_path):
    """SIGINT while a BLS request waits in its callee: the server drains it and exits 0 (serve() checks the code)."""
    started, release = tmp_path / "started", tmp_path / "release"
    with serve(*SERVE_ARGS) as stopping, concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(infer, stopping, "grpc", "bls_sync", A, B, target="gated", started=str(started),
                              release=str(release))
        wait_for_file(started)
        stopping.process.send_signal(signal.SIGINT)
        # The stop has begun (the server drains: it is no longer ready) while the call waits in its callee.
        with client_for(stopping, "http") as observer:
            wait_until(lambda: not observer.is_server_ready(), "the server draining")
        release.touch()
        result = pending.result(30)  # drained: the request in flight completes
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)


def test_a_bls_request_from_finalize_is_refused_in_tritons_words():
    """As Triton's qa bls/test.sh checks for its bls_finalize_error model: the refusal says BLS runs in execute."""
    with serve("--model-repository", str(REPOS / "bls_finalize")) as stopping:
        pass
    assert "finalize's BLS request raised: BLS is only supported during the 'execute' function." in stopping.log
