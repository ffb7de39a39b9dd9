"""A decoupled model that streams faster than its client takes the responses must neither stall the server's
event loop nor make the server buffer without bound (issue 13: no client can wedge, starve or bloat the server)."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Callable

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

from tests._support.metrics import pending_requests
from tests._support.rss import rss_bytes
from tests._support.serving import serve, tensor_args
from tests.frontend.grpc.raw_h2 import frame

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
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") +
                         frame(1, 0x4, 1, hpack.Encoder().encode(headers)) +
                         frame(0, 0, 1, b"\x00" + len(body).to_bytes(4, "big") + body))
            growth = 0
            for _ in range(5):  # never read: only the windows of HTTP/2 and TCP should limit what is buffered
                time.sleep(1)
                growth = max(growth, rss_bytes(pid) - before)
        _wait_until_answering(server.http_url)  # (so that it can stop)
        assert growth < 32 << 20, f"server RSS grew by {growth >> 20} MiB for one stream nobody reads"


def _flood(port: int, requests: int, then: Callable[[], None], sleep_s: str = "0.5", stall_s: float = 20.0) -> int:
    """Send `requests` ModelStreamInfer requests of 75 bytes to slow_pid on one stream, as fast as the server takes
    them, until the socket has taken none for `stall_s`; 2 s later call `then()` while the connection is still
    open; return how many were sent."""
    import hpack

    request = service_pb2.ModelInferRequest(model_name="slow_pid")
    request.inputs.add(name="INPUT", datatype="FP32", shape=[4])
    request.raw_input_contents.append(np.zeros(4, dtype=np.float32).tobytes())
    request.parameters["sleep"].string_param = sleep_s
    body = request.SerializeToString()
    message = frame(0, 0, 1, b"\x00" + len(body).to_bytes(4, "big") + body)
    headers = [(":method", "POST"), (":scheme", "http"),
               (":path", "/inference.GRPCInferenceService/ModelStreamInfer"), (":authority", "x"),
               ("content-type", "application/grpc"), ("te", "trailers")]
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(stall_s)
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") +
                     frame(1, 0x4, 1, hpack.Encoder().encode(headers)))
        sent = 0
        try:
            for _ in range(requests // 1000):  # as fast as the server takes them
                sock.sendall(message * 1000)
                sent += 1000
        except OSError:
            pass  # held back by flow control, or refused: either way the server is in charge
        time.sleep(2)  # an absence check: the server may take in more (a slow machine only makes it take less)
        then()
        return sent


@pytest.mark.slow
def test_requests_flooding_one_stream_hold_bounded_server_memory():
    """One stream carried any number of requests, each one a task and a queued job at once: 100k requests of 75
    bytes gave +480 MiB and 74k requests pending, whatever the concurrent-stream limit. At most
    `max_stream_requests_in_flight` (128) run now; the others wait unread, in the stream's flow-control window."""
    from tests._support.model_calls import SLOW_PID

    with serve("tests.models:slow_pid", *SLOW_PID) as server:
        pid = server.process.pid
        before = rss_bytes(pid)
        seen: dict[str, float] = {}
        sent = _flood(server.port, 100_000, lambda: seen.update(growth=rss_bytes(pid) - before,
                                                                pending=pending_requests(server)))
        _wait_until_answering(server.http_url)
        assert seen["pending"] <= 128, seen
        assert seen["growth"] < 64 << 20, f"server RSS grew by {seen['growth'] / 2**20:.0f} MiB for {sent} requests"


@pytest.mark.slow
def test_requests_waiting_unread_hold_the_streams_flow_control_window():
    """The stream's window goes back to the client only for the requests the server has read, so a client is held
    by flow control: one that ignores it and sends 20 MiB of requests (the window is 16 MiB) has its stream reset
    with FLOW_CONTROL_ERROR, having been given nothing back (it used to get its window back as its bytes arrived,
    and send on). The server's memory stays bounded, and it serves others meanwhile."""
    from tests._support.model_calls import SLOW_PID
    from tests.frontend.grpc import raw_h2

    with serve("tests.models:slow_pid", *SLOW_PID) as server:
        pid = server.process.pid
        before = rss_bytes(pid)
        request = service_pb2.ModelInferRequest(model_name="slow_pid")
        request.inputs.add(name="INPUT", datatype="FP32", shape=[4])
        request.raw_input_contents.append(np.zeros(4, dtype=np.float32).tobytes())
        request.parameters["sleep"].string_param = "0.01"
        message = raw_h2.frame(raw_h2.DATA, 0, 1, raw_h2.grpc_message(request.SerializeToString()))
        with raw_h2.RawH2(server.port, timeout_s=30) as client:
            client.handshake()
            client.headers(1, client.grpc_request("ModelStreamInfer"), end_stream=False)
            for _ in range((20 << 20) // (len(message) * 1000) + 1):
                client.send(message * 1000)
            reset = client.wait_for(lambda f: f.type in (raw_h2.RST_STREAM, raw_h2.GOAWAY), "the stream's end")
            assert (reset.type, reset.stream_id, reset.code) == (raw_h2.RST_STREAM, 1, raw_h2.FLOW_CONTROL_ERROR)
            assert not [f for f in client.seen if f.type == raw_h2.WINDOW_UPDATE and f.stream_id == 1]
            growth = rss_bytes(pid) - before
            tensor = grpcclient.InferInput("INPUT", [4], "FP32")
            tensor.set_data_from_numpy(np.zeros(4, dtype=np.float32))
            grpcclient.InferenceServerClient(server.grpc_url).infer("slow_pid", [tensor], client_timeout=60)
        _wait_until_answering(server.http_url)
        assert growth < 64 << 20, f"server RSS grew by {growth / 2**20:.0f} MiB"
