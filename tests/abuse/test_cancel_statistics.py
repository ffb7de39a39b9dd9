"""A unary request whose client leaves (deadline, reset, aio cancel, dropped HTTP connection) while the model RUNS it:
Triton 2.51 counts it once the execution ends, as a success with its execution (measured with its python backend: a
model sleeping 1.5 s, a gRPC `client_timeout` of 0.5 s or an aio task cancelled: success +1, inference_count +1,
execution_count +1, fail +0). Ours counts the same, on the callback path (gRPC ModelInfer) and the coroutine path
(HTTP, in-process)."""

from __future__ import annotations

import asyncio
import queue
import socket
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient

from tests._support.gates import GATED_PID_ARGS, Gates
from tests._support.metrics import metric_sum
from tests._support.serving import serve
from tests._support.waits import wait_until


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:gated_pid", *GATED_PID_ARGS, env={"PYTRITON_PIPELINE_DEPTH": "1"}) as running:
        yield running


@pytest.fixture
def gates(tmp_path):
    made = Gates(tmp_path)
    yield made
    made.release_all()


def _inputs(module=grpcclient):
    x = module.InferInput("X", [1], "INT32")
    x.set_data_from_numpy(np.array([1], dtype=np.int32))
    return [x]


def _counts(client) -> dict[str, int]:
    stats = client.get_inference_statistics("gated_pid", as_json=True)["model_stats"][0]
    inference = stats["inference_stats"]
    return {"success": int(inference.get("success", {}).get("count", 0)),
            "fail": int(inference.get("fail", {}).get("count", 0)),
            "inference_count": int(stats.get("inference_count", 0)),
            "execution_count": int(stats.get("execution_count", 0))}


def _leave_grpc(server, parameters, started, how):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    errors: queue.Queue = queue.Queue()
    if how == "deadline":
        client.async_infer("gated_pid", _inputs(), callback=lambda result, error: errors.put(error),
                           parameters=parameters, client_timeout=0.5)
        wait_until(started.exists, "the request starting")
        assert "Deadline" in str(errors.get(timeout=20))
    else:
        call = client.async_infer("gated_pid", _inputs(), callback=lambda result, error: errors.put(error),
                                  parameters=parameters)
        wait_until(started.exists, "the request starting")
        call.cancel()
        assert "CANCELLED" in str(errors.get(timeout=20))
    client.close()


def _leave_aio(server, parameters, started, how):
    async def main() -> None:
        client = aioclient.InferenceServerClient(server.grpc_url)
        task = asyncio.ensure_future(client.infer("gated_pid", _inputs(aioclient), parameters=parameters))
        deadline = time.monotonic() + 20
        while not started.exists():
            assert time.monotonic() < deadline, "the request never started"
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await client.close()

    asyncio.run(main())


def _leave_http(server, parameters, started, how):
    """A raw HTTP request whose connection the client closes while the model runs it."""
    body = ('{"parameters": {"started": "%s", "release": "%s"}, "inputs": [{"name": "X", "datatype": "INT32", '
            '"shape": [1], "data": [1]}]}') % (parameters["started"], parameters["release"])
    host, port = server.http_url.split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall((f"POST /v2/models/gated_pid/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        wait_until(started.exists, "the request starting")


@pytest.mark.parametrize(("leave", "how"), [(_leave_grpc, "deadline"), (_leave_grpc, "reset"), (_leave_aio, "cancel"),
                                            (_leave_http, "close")], ids=["grpc-deadline", "grpc-reset", "aio", "http"])
def test_a_request_left_while_running_counts_as_triton_counts_it(server, gates, leave, how):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    before = _counts(client)
    parameters, started, release = gates.parameters()
    leave(server, parameters, started, how)
    release.touch()
    wait_until(lambda: metric_sum(server, "nv_inference_pending_request_count") == 0, "nothing in flight")
    # the execution's end is counted when its (unwanted) answer arrives: poll for it with a deadline
    expected = {"success": before["success"] + 1, "fail": before["fail"],
                "inference_count": before["inference_count"] + 1, "execution_count": before["execution_count"] + 1}
    wait_until(lambda: _counts(client) == expected, f"the statistics {expected} (last: {_counts(client)})")
    client.infer("gated_pid", _inputs())  # the server answers on
    assert _counts(client)["success"] == expected["success"] + 1
    client.close()


STREAM_CONFIG = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [{ name: "X" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "Y" data_type: TYPE_FP32 dims: [1] }]
"""

STREAM_MODEL = """
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([0.0], np.float32))]))
            deadline = time.monotonic() + 30
            while not os.path.exists({release!r}) and time.monotonic() < deadline:
                time.sleep(0.01)
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([1.0], np.float32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""


def test_a_stream_cancelled_while_its_model_runs_counts_once_it_ends(tmp_path):
    """Measured with Triton 2.51: a decoupled python model (8 responses 0.2 s apart) whose gRPC stream the client stops
    with cancel_requests=True after 2 responses is counted once the model ends: success +1, inference_count +1,
    execution_count +1 (ours counted nothing but the execution)."""
    repo, release = tmp_path / "repo", tmp_path / "release"
    (repo / "stream" / "1").mkdir(parents=True)
    (repo / "stream" / "config.pbtxt").write_text(STREAM_CONFIG)
    (repo / "stream" / "1" / "model.py").write_text(STREAM_MODEL.format(release=str(release)))
    try:
        with serve("--model-repository", str(repo)) as server:
            client = grpcclient.InferenceServerClient(server.grpc_url)

            def counts() -> dict[str, int]:
                stats = client.get_inference_statistics("stream", as_json=True)["model_stats"][0]
                inference = stats["inference_stats"]
                return {"success": int(inference.get("success", {}).get("count", 0)),
                        "fail": int(inference.get("fail", {}).get("count", 0)),
                        "inference_count": int(stats.get("inference_count", 0)),
                        "execution_count": int(stats.get("execution_count", 0))}

            streaming = grpcclient.InferenceServerClient(server.grpc_url)
            got: queue.Queue = queue.Queue()
            streaming.start_stream(callback=lambda result, error: got.put((result, error)))
            x = grpcclient.InferInput("X", [1], "FP32")
            x.set_data_from_numpy(np.array([1.0], dtype=np.float32))
            streaming.async_stream_infer("stream", [x])
            result, error = got.get(timeout=20)
            assert error is None and result.as_numpy("Y").tolist() == [0.0]
            streaming.stop_stream(cancel_requests=True)
            release.touch()
            expected = {"success": 1, "fail": 0, "inference_count": 1, "execution_count": 1}
            wait_until(lambda: counts() == expected, f"the statistics {expected} (last: {counts()})")
            streaming.close()
            client.close()
    finally:
        release.touch()
