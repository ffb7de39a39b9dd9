"""Attacks on a ModelInfer answered from its job's callback (no task per request over the HTTP/2 transport): a call
that its client resets, lets run past its deadline or drops with its connection is withdrawn once; while queued it
never runs and counts as one CANCELED failure; the server answers on."""

from __future__ import annotations

import queue
import signal
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests._support.gates import GATED_PID_ARGS, Gates
from tests._support.metrics import metric_sum
from tests._support.serving import serve
from tests._support.waits import wait_until

@pytest.fixture(scope="module")
def server():
    with serve("tests.models:gated_pid", *GATED_PID_ARGS, env={"PYTRITON_PIPELINE_DEPTH": "1"}) as running:
        yield running


def _inputs():
    x = grpcclient.InferInput("X", [1], "INT32")
    x.set_data_from_numpy(np.array([1], dtype=np.int32))
    return [x]


def _stats(client) -> tuple[int, int]:
    stats = client.get_inference_statistics("gated_pid", as_json=True)["model_stats"][0]["inference_stats"]
    return int(stats.get("success", {}).get("count", 0)), int(stats.get("fail", {}).get("count", 0))


@pytest.fixture
def gates(tmp_path):
    """Gates of gated_pid requests; all released at the end of the test, whatever happened."""
    made = Gates(tmp_path)
    yield made
    made.release_all()


def _baseline(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    return client, _stats(client), metric_sum(server, "nv_inference_request_failure", 'reason="CANCELED"')


def _hold(client, gates: Gates):
    parameters, started, release = gates.parameters()
    answers: queue.Queue = queue.Queue()
    client.async_infer("gated_pid", _inputs(), callback=lambda result, error: answers.put((result, error)),
                       parameters=parameters)
    wait_until(started.exists, "the held request starting")
    return release, answers


@pytest.mark.parametrize("how", ["deadline", "reset", "connection", "gzip deadline"])
def test_queued_calls_the_client_leaves_never_run_and_count_once(server, gates, how):
    client, (success, fail), canceled = _baseline(server)
    release, held = _hold(client, gates)
    left = []
    errors: queue.Queue = queue.Queue()
    other = grpcclient.InferenceServerClient(server.grpc_url)
    for _ in range(5):
        parameters, started, _release = gates.parameters()
        left.append(started)
        parameters["release"] = str(release)
        if how.endswith("deadline"):
            other.async_infer("gated_pid", _inputs(), callback=lambda result, error: errors.put(error),
                              parameters=parameters, client_timeout=0.3,
                              compression_algorithm="gzip" if how.startswith("gzip") else None)
        else:
            left_call = other.async_infer("gated_pid", _inputs(), callback=lambda result, error: errors.put(error),
                                          parameters=parameters)
    wait_until(lambda: metric_sum(server, "nv_inference_pending_request_count") == 5, "5 requests queued")
    if how == "reset":
        left_call.cancel()  # (one of them)
    elif how == "connection":
        other.close()
    expected = {"deadline": 5, "reset": 1, "connection": 5, "gzip deadline": 5}[how]
    if how != "connection":
        for _ in range(expected):
            assert errors.get(timeout=20) is not None
    wait_until(lambda: metric_sum(server, "nv_inference_request_failure", 'reason="CANCELED"') == canceled + expected,
               f"{expected} CANCELED failures")
    release.touch()
    result, error = held.get(timeout=20)
    assert error is None
    wait_until(lambda: metric_sum(server, "nv_inference_pending_request_count") == 0, "nothing in flight")
    client.infer("gated_pid", _inputs())
    ran = sum(s.exists() for s in left)
    assert ran == 5 - expected  # the withdrawn ones never ran
    assert _stats(client) == (success + 2 + ran, fail + expected)
    assert metric_sum(server, "nv_inference_request_failure", 'reason="CANCELED"') == canceled + expected
    if how != "connection":
        other.close()
    client.close()


def test_a_running_call_the_client_resets_leaves_the_server_answering(server, gates):
    client, (success, fail), _ = _baseline(server)
    parameters, started, release = gates.parameters()
    errors: queue.Queue = queue.Queue()
    call = client.async_infer("gated_pid", _inputs(), callback=lambda result, error: errors.put(error),
                              parameters=parameters)
    wait_until(started.exists, "the request starting")
    call.cancel()
    assert "CANCELLED" in str(errors.get(timeout=20))
    release.touch()
    wait_until(lambda: metric_sum(server, "nv_inference_pending_request_count") == 0, "nothing in flight")
    for _ in range(3):
        client.infer("gated_pid", _inputs())
    after = _stats(client)
    # the reset one ran: a success once its execution ended, as Triton 2.51 counts it (test_cancel_statistics.py)
    assert after == (success + 4, fail)
    client.close()


def test_raw_stub_deadlines_shorter_than_the_queue(server, gates):
    """grpc-timeout from the raw stub (no client-side reset first): 20 calls queued with 50 ms deadlines."""
    client, (success, fail), canceled = _baseline(server)
    release, held = _hold(client, gates)
    request = service_pb2.ModelInferRequest(model_name="gated_pid")
    tensor = request.inputs.add(name="X", datatype="INT32")
    tensor.shape.append(1)
    request.raw_input_contents.append(np.array([1], dtype=np.int32).tobytes())
    with grpc.insecure_channel(server.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        futures = [stub.ModelInfer.future(request, timeout=0.05) for _ in range(20)]
        codes = [f.exception().code() for f in futures]
    assert set(codes) == {grpc.StatusCode.DEADLINE_EXCEEDED}
    wait_until(lambda: metric_sum(server, "nv_inference_request_failure", 'reason="CANCELED"') == canceled + 20,
               "20 CANCELED failures")
    release.touch()
    assert held.get(timeout=20)[1] is None
    wait_until(lambda: metric_sum(server, "nv_inference_pending_request_count") == 0, "nothing in flight")
    assert _stats(client) == (success + 1, fail + 20)
    client.close()


def _ready(client) -> bool:
    try:
        return client.is_server_ready()
    except Exception:  # noqa: BLE001 - (no answer: not ready)
        return False


def test_a_stop_drains_calls_running_and_queued(tmp_path):
    """SIGINT while one call runs and two wait: the server stops taking calls, answers the three, exits 0."""
    from tests._support.serving import ServerProcess

    server = ServerProcess(["tests.models:gated_pid", *GATED_PID_ARGS], env={"PYTRITON_PIPELINE_DEPTH": "1"})
    try:
        gates = Gates(tmp_path)
        client = grpcclient.InferenceServerClient(server.grpc_url)
        release, held = _hold(client, gates)
        answers: queue.Queue = queue.Queue()
        for _ in range(2):
            parameters, _started, _release = gates.parameters()
            parameters["release"] = str(release)
            client.async_infer("gated_pid", _inputs(), callback=lambda result, error: answers.put(error),
                               parameters=parameters)
        wait_until(lambda: metric_sum(server, "nv_inference_pending_request_count") == 2, "2 requests queued")
        server.process.send_signal(signal.SIGINT)
        wait_until(lambda: not _ready(client), "the drain beginning")
        release.touch()
        assert held.get(timeout=20)[1] is None
        assert [answers.get(timeout=20) for _ in range(2)] == [None, None]
        assert server.stop() == 0
        client.close()
    finally:
        gates.release_all()
        server.stop()


def test_grpc_aio_calls_cancelled_while_queued(server, gates):
    """The same through tritonclient.grpc.aio (a task cancelled: the call is reset)."""
    import asyncio

    import tritonclient.grpc.aio as aioclient

    client, (success, fail), canceled = _baseline(server)
    release, held = _hold(client, gates)

    async def main() -> None:
        aio = aioclient.InferenceServerClient(server.grpc_url)
        x = aioclient.InferInput("X", [1], "INT32")
        x.set_data_from_numpy(np.array([1], dtype=np.int32))
        tasks = []
        for _ in range(3):
            parameters, _started, _release = gates.parameters()
            parameters["release"] = str(release)
            tasks.append(asyncio.ensure_future(aio.infer("gated_pid", [x], parameters=parameters)))
        deadline = time.monotonic() + 20
        while metric_sum(server, "nv_inference_pending_request_count") != 3:
            assert time.monotonic() < deadline, "3 requests queued never happened"
            await asyncio.sleep(0.01)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await aio.close()

    asyncio.run(main())
    wait_until(lambda: metric_sum(server, "nv_inference_request_failure", 'reason="CANCELED"') == canceled + 3,
               "3 CANCELED failures")
    release.touch()
    assert held.get(timeout=20)[1] is None
    wait_until(lambda: metric_sum(server, "nv_inference_pending_request_count") == 0, "nothing in flight")
    assert _stats(client) == (success + 1, fail + 3)
    client.close()
