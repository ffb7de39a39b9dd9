"""Keepalive, the ping policy and infer response compression through the CLI options and real clients (grpcio's
channel, tritonclient), on our HTTP/2 transport and on the grpcio fallback (PYTRITON_GRPC_SERVER=grpcio): a client
pinging within the policy keeps its connection while idle, one pinging faster loses it (GOAWAY too_many_pings);
infer responses are gzip on the wire when the client accepts gzip and the level is not "none"."""

from __future__ import annotations

import gzip
import queue
import threading
import time
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

from tests._support.serving import ServerProcess, serve, tensor_args
from tests.frontend.grpc.raw_h2 import RawH2, grpc_message

IDENTITY = ["--max-batch-size", "0", *tensor_args("input", [("IN_FP32", "fp32", "-1")]),
            *tensor_args("output", [("OUT_FP32", "fp32", "-1")])]  # fmt: skip
IMPLEMENTATIONS = ["h2", "grpcio"]


def server_for(implementation: str, *args: str) -> Iterator[ServerProcess]:
    return serve("tests.models:identity", *IDENTITY, *args, env={"PYTRITON_GRPC_SERVER": implementation})


class States:
    """The connectivity states a grpc channel goes through (grpcio calls back from its own thread)."""

    def __init__(self, channel: grpc.Channel):
        self.seen: list[grpc.ChannelConnectivity] = []
        self.changed = threading.Condition()
        self.channel = channel
        channel.subscribe(self._on_change, try_to_connect=True)

    def _on_change(self, state: grpc.ChannelConnectivity) -> None:
        with self.changed:
            self.seen.append(state)
            self.changed.notify_all()

    def left_ready_within(self, seconds: float) -> bool:
        """Whether the channel, READY now, leaves READY (the server closed the connection) within `seconds`."""
        with self.changed:
            assert self.seen and self.seen[-1] == grpc.ChannelConnectivity.READY, self.seen
            start = len(self.seen)
            return self.changed.wait_for(lambda: len(self.seen) > start, seconds)

    def close(self) -> None:
        self.channel.unsubscribe(self._on_change)


def keepalive_client(url: str, time_ms: int) -> grpcclient.InferenceServerClient:
    """tritonclient pinging every `time_ms` even without calls (no limit on PINGs without data)."""
    options = grpcclient.KeepAliveOptions(keepalive_time_ms=time_ms, keepalive_timeout_ms=5000,
                                          keepalive_permit_without_calls=True, http2_max_pings_without_data=0)
    return grpcclient.InferenceServerClient(url, keepalive_options=options)


def infer_works(client: grpcclient.InferenceServerClient) -> None:
    x = grpcclient.InferInput("IN_FP32", [4], "FP32")
    x.set_data_from_numpy(np.arange(4, dtype=np.float32))
    assert client.infer("identity", [x]).as_numpy("OUT_FP32").tolist() == [0.0, 1.0, 2.0, 3.0]


def idle_with_keepalive(url: str, time_ms: int, idle_s: float) -> bool:
    """A tritonclient with keepalive makes a call, then stays idle: whether its connection was closed meanwhile.
    It works again afterwards either way (it reconnects)."""
    with keepalive_client(url, time_ms) as client:
        infer_works(client)
        states = States(client._channel)  # noqa: SLF001 - the client's grpc channel, to watch its connection
        try:
            deadline = time.monotonic() + 5
            while grpc.ChannelConnectivity.READY not in states.seen[-1:]:
                assert time.monotonic() < deadline, states.seen
                time.sleep(0.01)
            dropped = states.left_ready_within(idle_s)
        finally:
            states.close()
        infer_works(client)
        return dropped


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_keepalive_within_the_policy_keeps_the_connection_fast(implementation):
    """Scaled down: the client pings every 0.3 s. With PINGs permitted without calls and an interval of 0.1 s the
    connection stays up for 2 s idle (about 6 PINGs; a policy that struck them would drop it at the third: an
    absence check, which a slow machine can only make miss a drop, not fail); with Triton's defaults (no PINGs
    without calls) the same client is sent GOAWAY too_many_pings after its strikes and its channel leaves READY."""
    permitted = ["--grpc-keepalive-permit-without-calls", "true",
                 "--grpc-http2-min-recv-ping-interval-without-data", "100"]  # fmt: skip
    with server_for(implementation, *permitted) as server:
        assert not idle_with_keepalive(server.grpc_url, 300, 2.0)
    with server_for(implementation) as server:
        assert idle_with_keepalive(server.grpc_url, 300, 10.0)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_keepalive_interval_below_the_minimum_is_refused(implementation):
    """PINGs permitted without calls but more often than --grpc-http2-min-recv-ping-interval-without-data: dropped
    after --grpc-http2-max-ping-strikes."""
    args = ["--grpc-keepalive-permit-without-calls", "true", "--grpc-http2-min-recv-ping-interval-without-data",
            "5000", "--grpc-http2-max-ping-strikes", "1"]
    with server_for(implementation, *args) as server:
        assert idle_with_keepalive(server.grpc_url, 500, 10.0)


@pytest.mark.slow
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_keepalive_within_the_policy_keeps_the_connection_over_a_minute(implementation):
    """Real-sized times: a client pinging every 10 s, the server allowing one per 5 s without calls, 65 s idle."""
    permitted = ["--grpc-keepalive-permit-without-calls", "true",
                 "--grpc-http2-min-recv-ping-interval-without-data", "5000"]  # fmt: skip
    with server_for(implementation, *permitted) as server:
        assert not idle_with_keepalive(server.grpc_url, 10_000, 65.0)


# ---- infer response compression ----------------------------------------------------------------------------------


def raw_infer(port: int, accept: str | None, values: np.ndarray) -> tuple[dict[str, str], bytes]:
    """ModelInfer over a raw HTTP/2 connection: the response headers and the response message as sent."""
    request = service_pb2.ModelInferRequest(model_name="identity")
    tensor = request.inputs.add(name="IN_FP32", datatype="FP32", shape=[values.size])
    assert tensor is not None
    request.raw_input_contents.append(values.astype(np.float32).tobytes())
    with RawH2(port) as raw:
        raw.handshake()
        extra = [] if accept is None else [("grpc-accept-encoding", accept)]
        raw.headers(1, raw.grpc_request("ModelInfer", extra), end_stream=False)
        raw.data(1, grpc_message(request.SerializeToString()))
        headers, message, trailers = raw.answer(1)
    assert trailers["grpc-status"] == "0", trailers
    return headers, message


def decoded(message: bytes) -> np.ndarray:
    """The output of a response message (5-byte prefix: compressed flag, length), inflated when compressed."""
    assert int.from_bytes(message[1:5], "big") == len(message) - 5
    body = gzip.decompress(message[5:]) if message[0] == 1 else message[5:]
    response = service_pb2.ModelInferResponse.FromString(body)
    return np.frombuffer(response.raw_output_contents[0], dtype=np.float32)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_infer_responses_are_gzip_when_accepted(implementation):
    values = np.repeat(np.arange(8, dtype=np.float32), 4096)  # compressible: 128 KiB
    with server_for(implementation, "--grpc-infer-response-compression-level", "high") as server:
        headers, message = raw_infer(server.port, "identity,deflate,gzip", values)
        assert headers.get("grpc-encoding") == "gzip" and message[0] == 1
        assert np.array_equal(decoded(message), values)
        assert len(message) < values.nbytes // 10  # it shrank
        if implementation == "h2":  # gzip is only used when asked for (grpcio answers with what it accepts)
            small = values[:4096]  # (the raw client gives no more than its first 64 KiB window)
            headers, message = raw_infer(server.port, None, small)
            assert "grpc-encoding" not in headers and message[0] == 0
            assert np.array_equal(decoded(message), small)
        with grpcclient.InferenceServerClient(server.grpc_url) as client:  # tritonclient inflates them
            x = grpcclient.InferInput("IN_FP32", [values.size], "FP32")
            x.set_data_from_numpy(values)
            assert np.array_equal(client.infer("identity", [x]).as_numpy("OUT_FP32"), values)
            x.set_data_from_numpy(values)  # and a gzip request is inflated by the server
            result = client.infer("identity", [x], compression_algorithm="gzip")
            assert np.array_equal(result.as_numpy("OUT_FP32"), values)
            infer_works(client)
            results: queue.Queue = queue.Queue()  # ModelStreamInfer's responses are compressed too
            client.start_stream(callback=lambda result, error: results.put((result, error)))
            try:
                for _ in range(3):
                    client.async_stream_infer("identity", [x])
                for _ in range(3):
                    result, error = results.get(timeout=30)
                    assert error is None and np.array_equal(result.as_numpy("OUT_FP32"), values)
            finally:
                client.stop_stream()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_no_compression_by_default(implementation):
    values = np.zeros(4096, dtype=np.float32)
    with server_for(implementation) as server:
        headers, message = raw_infer(server.port, "identity,deflate,gzip", values)
        assert "grpc-encoding" not in headers or headers["grpc-encoding"] == "identity"
        assert message[0] == 0 and len(message) == 5 + len(message[5:]) and np.array_equal(decoded(message), values)


def test_compression_levels_shrink_more():
    """low, medium, high: zlib levels 1, 6, 9 on our transport; a response that would not shrink goes uncompressed."""
    rng = np.random.default_rng(0)
    values = np.round(rng.normal(size=16384), 1).astype(np.float32)  # 64 KiB
    sizes = {}
    for level in ("low", "medium", "high"):
        with server_for("h2", "--grpc-infer-response-compression-level", level) as server:
            headers, message = raw_infer(server.port, "gzip", values)
            assert headers["grpc-encoding"] == "gzip" and message[0] == 1
            assert np.array_equal(decoded(message), values)
            sizes[level] = len(message)
            noise = rng.integers(0, 2**32, size=1024, dtype=np.uint32).view(np.float32)
            noise = noise[np.isfinite(noise)]
            _, message = raw_infer(server.port, "gzip", noise)
            assert message[0] == 0 and np.array_equal(decoded(message), noise, equal_nan=True)
    assert sizes["low"] > sizes["medium"] >= sizes["high"], sizes
