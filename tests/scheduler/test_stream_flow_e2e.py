"""A decoupled model that streams faster than its client takes the responses must neither stall the server's
event loop nor make the server buffer without bound (issue 13: no client can wedge, starve or bloat the server)."""

from __future__ import annotations

import socket
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

from tests.abuse._rss import rss_bytes
from tests.conftest import serve, tensor_args
from tests.scheduler.test_cancellation_e2e import _frame

ARGS = ["--decoupled"] + tensor_args("input", [("COUNT", "int32", "1")]) + tensor_args(
    "output", [("VALUE", "int32", "1")])


def test_a_fast_stream_does_not_stall_the_server():
    """ProxyRouter._drain read the worker socket until it was empty, which it never is while a fast generator runs:
    one ordinary stream of 100k int32 responses kept /v2/health/live from answering for ~10 s (300k: > 30 s, SIGINT
    not handled meanwhile, +800 MiB). It now handles a bounded batch per turn of the loop."""
    with serve("tests.models:countdown", "--model-name", "countdown", *ARGS) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        received = []
        client.start_stream(callback=lambda result, error: received.append(error))
        tensor = grpcclient.InferInput("COUNT", [1], "INT32")
        tensor.set_data_from_numpy(np.array([100_000], dtype=np.int32))
        client.async_stream_infer("countdown", [tensor])
        try:
            deadline = time.monotonic() + 20
            while not received and time.monotonic() < deadline:
                time.sleep(0.01)
            for _ in range(3):  # while the stream runs, the server still answers others
                with urllib.request.urlopen(f"http://{server.http_url}/v2/health/live", timeout=5) as response:
                    assert response.status == 200
                time.sleep(0.2)
        finally:
            client.stop_stream(cancel_requests=True)
            _wait_until_answering(server.http_url)  # (so that it can stop)


def _wait_until_answering(http_url: str, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{http_url}/v2/health/live", timeout=5):
                return
        except OSError:
            time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    "Nothing paces a stream to its consumer: the worker sends responses as fast as the generator yields them (the "
    "ROUTER socket's receive queue is unbounded, RCVHWM=0, pytriton/proxy/router.py), each response is queued "
    "without bound in Job.queue (scheduler/job.py), and ModelStreamInfer's handle() moves them on into the "
    "servicer's unbounded queue (frontend/grpc/servicer.py) whatever the HTTP/2 send window says. Measured: a client "
    "that opens a stream and never reads grows the server by 12-50 MiB/s (+415 MiB in 8 s for a 200k-response "
    "stream), bounded only by how many responses the model yields. Fix: a credit window per stream between server "
    "and worker (the worker waits, still answering CANCEL, once N responses are not yet taken), refilled as the "
    "front-end hands responses to the transport; the HTTP/2 send window then bounds what the server holds."))
def test_a_stream_whose_client_does_not_read_holds_bounded_server_memory():
    import hpack

    with serve("tests.models:countdown", "--model-name", "countdown", *ARGS) as server:
        pid = server.process.pid
        before = rss_bytes(pid)
        request = service_pb2.ModelInferRequest(model_name="countdown")
        request.inputs.add(name="COUNT", datatype="INT32", shape=[1])
        request.raw_input_contents.append(np.array([200_000], dtype=np.int32).tobytes())
        body = request.SerializeToString()
        headers = [(":method", "POST"), (":scheme", "http"),
                   (":path", "/inference.GRPCInferenceService/ModelStreamInfer"), (":authority", "x"),
                   ("content-type", "application/grpc"), ("te", "trailers")]
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0, b"") +
                         _frame(1, 0x4, 1, hpack.Encoder().encode(headers)) +
                         _frame(0, 0, 1, b"\x00" + len(body).to_bytes(4, "big") + body))
            growth = 0
            for _ in range(5):  # never read: only the windows of HTTP/2 and TCP should limit what is buffered
                time.sleep(1)
                growth = max(growth, rss_bytes(pid) - before)
        _wait_until_answering(server.http_url)  # (so that it can stop)
        assert growth < 32 << 20, f"server RSS grew by {growth >> 20} MiB for one stream nobody reads"


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    "One ModelStreamInfer stream carries any number of requests, and each one the server reads becomes a task and a "
    "queued job at once (InferenceServicer.ModelStreamInfer.read, frontend/grpc/servicer.py): there is no cap "
    "on the requests in flight per stream, and the HTTP/2 transport gives the client its receive window back as "
    "bytes arrive, not as the handler consumes them (h2.py GrpcConnection._consumed), so nothing slows the client "
    "down. Measured: 100k requests of 75 bytes (7 MiB) on one stream to a slow model: +480 MiB of server RSS and "
    "74k requests pending, from one connection whatever its concurrent-stream limit. Fix: a per-stream cap of "
    "requests in flight (the reader awaits a semaphore before it takes the next request), with the stream's "
    "window returned only as its messages are taken, so the client is held by HTTP/2 flow control."))
def test_requests_flooding_one_stream_hold_bounded_server_memory():
    import hpack

    from tests.e2e.test_workers import SLOW_PID

    with serve("tests.models:slow_pid", *SLOW_PID) as server:
        pid = server.process.pid
        before = rss_bytes(pid)
        request = service_pb2.ModelInferRequest(model_name="slow_pid")
        request.inputs.add(name="INPUT", datatype="FP32", shape=[4])
        request.raw_input_contents.append(np.zeros(4, dtype=np.float32).tobytes())
        request.parameters["sleep"].string_param = "0.5"
        body = request.SerializeToString()
        message = _frame(0, 0, 1, b"\x00" + len(body).to_bytes(4, "big") + body)
        headers = [(":method", "POST"), (":scheme", "http"),
                   (":path", "/inference.GRPCInferenceService/ModelStreamInfer"), (":authority", "x"),
                   ("content-type", "application/grpc"), ("te", "trailers")]
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.settimeout(20)
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0, b"") +
                         _frame(1, 0x4, 1, hpack.Encoder().encode(headers)))
            sent = 0
            try:
                for _ in range(100):  # 100k requests, 7 MiB, as fast as the server takes them
                    sock.sendall(message * 1000)
                    sent += 1000
            except OSError:
                pass  # held back by flow control, or refused: either way the server is in charge
            time.sleep(2)
            growth = rss_bytes(pid) - before
        _wait_until_answering(server.http_url)
        assert growth < 64 << 20, f"server RSS grew by {growth >> 20} MiB for {sent} requests on one stream"
