"""The gRPC front-end's own HTTP/2 transport (pytriton/frontend/h2/connection.py), end to end (moved from tests/e2e).

Through the real clients (tritonclient.grpc, .aio, grpc_health) for what users do, and through raw HTTP/2
frames for what those clients never send but another client may (padding, CONTINUATION, split prefixes,
garbage, unknown methods, server-side deadlines). The grpc.aio fallback (PYTRITON_GRPC_SERVER=grpcio) is
checked at the end.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import subprocess
import sys
import time

import grpc
import hpack
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tritonclient.grpc import service_pb2 as pb
from tritonclient.utils import InferenceServerException

from tests._support.paths import REPO
from tests._support.serving import lazy_servers, serve, serve_on_a_taken_port, tensor_args
from tests._support.sockets import unread_bytes
from tests._support.waits import wait_until

TIMEOUT_S = 60
IDENTITY = ["--max-batch-size", "0"] + tensor_args("input", [("IN_FP32", "fp32", "-1")]) + tensor_args(
    "output", [("OUT_FP32", "fp32", "-1")]
)
SLOW_PID = tensor_args("input", [("INPUT", "fp32", "4")]) + tensor_args("output", [("PID", "int64", "1")])
ECHO = tensor_args("input", [("INPUT", "fp32", "4")]) + tensor_args("output", [("PARAMS", "bytes", "1")])
SERVERS = {
    "identity": ("tests.models:identity", IDENTITY),
    "slow": ("tests.models:slow_pid", SLOW_PID),
    "forward": ("tests.models:echo_parameters", ECHO + ["--grpc-header-forward-pattern", "x-.*"]),
}

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x4, 0x8, 0x20
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


# Raw frames test our transport; grpc's server (PYTRITON_GRPC_SERVER=grpcio) answers some of them differently.
h2_only = pytest.mark.skipif(os.environ.get("PYTRITON_GRPC_SERVER") == "grpcio", reason="tests our HTTP/2 transport")


@pytest.fixture(scope="module")
def servers():
    yield from lazy_servers(SERVERS)


# ---- a raw HTTP/2 client -----------------------------------------------------------------------------------


def frame(ftype: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return struct.pack(">HBBBL", len(payload) >> 8, len(payload) & 0xFF, ftype, flags, stream_id) + payload


class RawH2:
    """Just enough of an HTTP/2 client to send hand-made frames and read the answer of one stream."""

    def __init__(self, url: str):
        host, port = url.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def start(self) -> None:
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0, b""))

    def request_headers(self, path: str, extra: list[tuple[str, str]] = ()) -> bytes:
        return self.encoder.encode(
            [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "localhost"),
             ("content-type", "application/grpc"), ("te", "trailers"), *extra]
        )  # fmt: skip

    def read_frame(self) -> tuple[int, int, int, bytes] | None:
        while len(self.buffer) < 9 or len(self.buffer) < 9 + int.from_bytes(self.buffer[:3], "big"):
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        length = int.from_bytes(self.buffer[:3], "big")
        ftype, flags, stream_id = self.buffer[3], self.buffer[4], int.from_bytes(self.buffer[5:9], "big")
        payload, self.buffer = self.buffer[9 : 9 + length], self.buffer[9 + length :]
        if ftype == SETTINGS and not flags & 1:
            self.sock.sendall(frame(SETTINGS, 1, 0, b""))
        return ftype, flags, stream_id & 0x7FFFFFFF, payload

    def answer(self, stream_id: int) -> tuple[dict[str, str], bytes, dict[str, str]]:
        """(response headers, DATA bytes, trailers) of `stream_id`; trailers-only answers give ({}, b"", trailers)."""
        headers: dict[str, str] = {}
        data = b""
        while True:
            item = self.read_frame()
            assert item is not None, "the server closed the connection"
            ftype, flags, sid, payload = item
            if sid != stream_id:
                continue
            if ftype == DATA:
                data += payload
            elif ftype == HEADERS:
                decoded = dict(self.decoder.decode(payload))
                if flags & END_STREAM:
                    if not headers and not data:
                        return {}, b"", decoded
                    return headers, data, decoded
                headers = decoded
            elif ftype == RST_STREAM:
                raise AssertionError(f"stream reset: {payload.hex()}")


def grpc_message(body: bytes) -> bytes:
    return b"\x00" + len(body).to_bytes(4, "big") + body


def messages(data: bytes) -> list[bytes]:
    out = []
    while data:
        size = int.from_bytes(data[1:5], "big")
        out.append(data[5 : 5 + size])
        data = data[5 + size :]
    return out


def fp32_input(name: str, array: np.ndarray, module=grpcclient):
    tensor = module.InferInput(name, list(array.shape), "FP32")
    tensor.set_data_from_numpy(array)
    return tensor


# ---- through the real clients --------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests_are_decompressed(servers, algorithm):
    array = np.arange(300_000, dtype=np.float32)
    with grpcclient.InferenceServerClient(servers["identity"].grpc_url) as client:
        result = client.infer("identity", [fp32_input("IN_FP32", array)], compression_algorithm=algorithm,
                              client_timeout=TIMEOUT_S)
    np.testing.assert_array_equal(result.as_numpy("OUT_FP32"), array)


def test_tensors_larger_than_every_flow_control_window(servers):
    """72 MiB each way: more than our 16 MiB receive windows and the client's 4 MiB ones, so both sides wait for
    WINDOW_UPDATEs, and more than the 64 MiB a connection allocates up front for a message (this one's buffer grows
    as it arrives); then several at once so their DATA frames interleave on one connection."""
    url = servers["identity"].grpc_url
    big = np.random.default_rng(1).random(18 * 1024 * 1024, dtype=np.float32)
    with grpcclient.InferenceServerClient(url) as client:
        result = client.infer("identity", [fp32_input("IN_FP32", big)], client_timeout=TIMEOUT_S)
        np.testing.assert_array_equal(result.as_numpy("OUT_FP32"), big)

    async def many() -> None:
        arrays = [np.full(750_000 + 1000 * i, i, dtype=np.float32) for i in range(12)]
        async with grpcaio.InferenceServerClient(url) as client:
            results = await asyncio.gather(*(
                client.infer("identity", [fp32_input("IN_FP32", a, grpcaio)], client_timeout=TIMEOUT_S)
                for a in arrays
            ))  # fmt: skip
        for array, result in zip(arrays, results):
            np.testing.assert_array_equal(result.as_numpy("OUT_FP32"), array)

    asyncio.run(many())


def test_alternating_calls_and_metadata_on_one_connection(servers):
    """The client's HPACK encoder indexes the header fields it repeats (then a whole header block can be one-byte
    references, which the server looks up directly): every call must still reach its own method and see its own
    metadata."""
    x = fp32_input("INPUT", np.zeros(4, dtype=np.float32))
    seen = []
    with grpcclient.InferenceServerClient(servers["forward"].grpc_url) as client:
        for i in range(8):  # no metadata and no grpc-timeout: after the first round every field is indexed
            assert client.is_server_live()
            assert client.get_model_metadata("echo_parameters", as_json=True)["name"] == "echo_parameters"
            assert client.infer("echo_parameters", [x]).as_numpy("PARAMS")[0] == b""
            assert client.is_model_ready("echo_parameters")
        for i in range(8):
            headers = {"x-call": str(i % 2), "x-other": "o" * (i % 3), "y-not-forwarded": "n"}
            result = client.infer("echo_parameters", [x], headers=headers)
            seen.append(result.as_numpy("PARAMS")[0].decode())
    assert seen == [f"x-call='{i % 2}';x-other='{'o' * (i % 3)}'" for i in range(8)]


def test_cancelled_call_leaves_the_connection_usable(servers):
    """An aio client giving up sends RST_STREAM: the call is cancelled, the connection and server carry on."""
    url = servers["slow"].grpc_url
    x = fp32_input("INPUT", np.zeros(4, dtype=np.float32), grpcaio)

    async def run() -> int:
        async with grpcaio.InferenceServerClient(url) as client:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.infer("slow_pid", [x], parameters={"sleep": "1.5"}), 0.3)
            result = await client.infer("slow_pid", [x], parameters={"sleep": "0"}, client_timeout=TIMEOUT_S)
            return int(result.as_numpy("PID")[0])

    assert asyncio.run(run()) in servers["slow"].worker_pids()


def test_health_check_and_watch(servers):
    channel = grpc.insecure_channel(servers["identity"].grpc_url)
    try:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "inference.GRPCInferenceService"):
            assert stub.Check(health_pb2.HealthCheckRequest(service=service)).status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as info:
            stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT_S)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
        unknown = stub.Watch(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=TIMEOUT_S)
        assert next(unknown).status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
        unknown.cancel()
    finally:
        channel.close()


def test_unknown_method_answers_unimplemented(servers):
    channel = grpc.insecure_channel(servers["identity"].grpc_url)
    try:
        call = channel.unary_unary("/inference.GRPCInferenceService/NoSuchMethod")
        with pytest.raises(grpc.RpcError) as info:
            call(b"", timeout=TIMEOUT_S)
        assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert info.value.details() == "Method not found!"
    finally:
        channel.close()


# ---- raw frames --------------------------------------------------------------------------------------------------


@h2_only
def test_padding_priority_continuation_and_split_messages(servers):
    """A header block cut over HEADERS (padded, with priority) and two CONTINUATIONs; the message in three padded
    DATA frames, its 5-byte prefix itself cut in two."""
    raw = RawH2(servers["identity"].grpc_url)
    try:
        raw.start()
        block = raw.request_headers("/inference.GRPCInferenceService/ModelReady", [("x-some", "thing")])
        body = grpc_message(pb.ModelReadyRequest(name="identity").SerializeToString())
        pad = 7
        first = bytes([pad]) + b"\x80\x00\x00\x00\x10" + block[:5] + b"\x00" * pad
        raw.sock.sendall(
            frame(HEADERS, PADDED | PRIORITY_FLAG, 1, first)
            + frame(CONTINUATION, 0, 1, block[5:9])
            + frame(CONTINUATION, END_HEADERS, 1, block[9:])
            + frame(DATA, PADDED, 1, bytes([3]) + body[:2] + b"\x00" * 3)
            + frame(DATA, 0, 1, body[2:7])
            + frame(DATA, PADDED | END_STREAM, 1, bytes([1]) + body[7:] + b"\x00")
        )
        headers, data, trailers = raw.answer(1)
        assert headers[":status"] == "200" and headers["content-type"] == "application/grpc"
        assert trailers["grpc-status"] == "0"
        (message,) = messages(data)
        assert pb.ModelReadyResponse.FromString(message).ready is True
        # the same connection goes on: a second stream, PING answered
        raw.sock.sendall(frame(PING, 0, 0, b"12345678"))
        while (item := raw.read_frame()) is not None and item[0] != PING:
            pass
        assert item is not None and item[1] == 1 and item[3] == b"12345678"
        block = raw.request_headers("/inference.GRPCInferenceService/ServerLive")
        raw.sock.sendall(frame(HEADERS, END_HEADERS, 3, block) + frame(DATA, END_STREAM, 3, grpc_message(b"")))
        _, data, trailers = raw.answer(3)
        assert trailers["grpc-status"] == "0" and pb.ServerLiveResponse.FromString(messages(data)[0]).live
    finally:
        raw.close()


@h2_only
def test_bad_requests_get_a_status_and_the_server_stays_up(servers):
    url = servers["identity"].grpc_url
    raw = RawH2(url)
    try:
        raw.start()
        block = raw.request_headers("/inference.GRPCInferenceService/ModelInfer")
        raw.sock.sendall(frame(HEADERS, END_HEADERS, 1, block) + frame(DATA, END_STREAM, 1, grpc_message(b"\xff" * 40)))
        _, _, trailers = raw.answer(1)
        assert trailers["grpc-status"] == str(grpc.StatusCode.INTERNAL.value[0])
        assert "deserializing" in trailers["grpc-message"]
        block = raw.request_headers("/inference.GRPCInferenceService/ModelInfer", [("grpc-encoding", "snappy")])
        raw.sock.sendall(frame(HEADERS, END_HEADERS, 3, block) + frame(DATA, END_STREAM, 3, grpc_message(b"")))
        _, _, trailers = raw.answer(3)
        assert trailers["grpc-status"] == str(grpc.StatusCode.UNIMPLEMENTED.value[0])
        assert "snappy" in trailers["grpc-message"]
        # 24 MiB of zero bytes: not a request; answered at once (read as fields, it would be 24 million of them)
        block = raw.request_headers("/inference.GRPCInferenceService/ModelInfer")
        started = time.monotonic()
        zeros = grpc_message(bytes(24 << 20))
        half = len(zeros) // 2
        raw.sock.sendall(frame(HEADERS, END_HEADERS, 5, block) + frame(DATA, 0, 5, zeros[:half])
                         + frame(DATA, END_STREAM, 5, zeros[half:]))
        _, _, trailers = raw.answer(5)
        assert trailers["grpc-status"] == str(grpc.StatusCode.INTERNAL.value[0])
        assert time.monotonic() - started < 5
        # an unknown model: the core's error, percent-encoded where needed
        block = raw.request_headers("/inference.GRPCInferenceService/ModelInfer")
        body = pb.ModelInferRequest(model_name="nämeless").SerializeToString()
        raw.sock.sendall(frame(HEADERS, END_HEADERS, 7, block) + frame(DATA, END_STREAM, 7, grpc_message(body)))
        _, _, trailers = raw.answer(7)
        assert trailers["grpc-status"] != "0" and "n%C3%A4meless" in trailers["grpc-message"]
    finally:
        raw.close()
    host, port = url.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as garbage:
        garbage.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        while chunk := garbage.recv(65536):  # the server closes the connection
            received += chunk
    kinds = {}
    while len(received) >= 9:
        length = int.from_bytes(received[:3], "big")
        kinds[received[3]] = received[9 : 9 + length]
        received = received[9 + length :]
    assert SETTINGS in kinds and GOAWAY in kinds
    assert int.from_bytes(kinds[GOAWAY][4:8], "big") == 1  # PROTOCOL_ERROR
    with grpcclient.InferenceServerClient(url) as client:
        assert client.is_server_live()


def test_server_side_deadline(servers):
    """grpc-timeout is enforced by the server: the answer comes at the deadline, not when the callable ends."""
    raw = RawH2(servers["slow"].grpc_url)
    try:
        raw.start()
        request = pb.ModelInferRequest(model_name="slow_pid")
        request.parameters["sleep"].string_param = "3"
        tensor = request.inputs.add(name="INPUT", datatype="FP32", shape=[4])
        tensor.contents.fp32_contents.extend([0.0] * 4)
        block = raw.request_headers("/inference.GRPCInferenceService/ModelInfer", [("grpc-timeout", "300m")])
        started = time.monotonic()
        raw.sock.sendall(frame(HEADERS, END_HEADERS, 1, block)
                         + frame(DATA, END_STREAM, 1, grpc_message(request.SerializeToString())))
        _, _, trailers = raw.answer(1)
        elapsed = time.monotonic() - started
        assert trailers["grpc-status"] == str(grpc.StatusCode.DEADLINE_EXCEEDED.value[0])
        assert elapsed < 2.5
    finally:
        raw.close()


# ---- the grpc.aio fallback ---------------------------------------------------------------------------------------


def test_grpcio_fallback_serves_the_same_api():
    with serve("tests.models:identity", *IDENTITY, env={"PYTRITON_GRPC_SERVER": "grpcio"}) as server:
        array = np.arange(1000, dtype=np.float32)
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            assert client.is_server_ready()
            result = client.infer("identity", [fp32_input("IN_FP32", array)], client_timeout=TIMEOUT_S)
            np.testing.assert_array_equal(result.as_numpy("OUT_FP32"), array)
            with pytest.raises(InferenceServerException, match="unknown_model"):
                client.infer("unknown_model", [fp32_input("IN_FP32", array)], client_timeout=TIMEOUT_S)


def test_unknown_grpc_server_choice_is_refused():
    result = subprocess.run(
        [sys.executable, "-m", "pytriton.cli", "serve", "tests.models:identity", *IDENTITY, "--grpc-port", "0",
         "--http-port", "0", "--metrics-port", "0"],
        cwd=REPO, env={**os.environ, "PYTRITON_GRPC_SERVER": "nope"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "PYTRITON_GRPC_SERVER='nope'" in result.stdout + result.stderr


# ---- the transport alone, in this process --------------------------------------------------------------------


def test_status_chosen_with_set_code():
    """grpc's generated base methods (and some servicers) end a call with set_code/set_details, not abort."""
    from pytriton.frontend.h2 import connection as h2

    async def chooses(request, context):
        context.set_code(grpc.StatusCode.NOT_FOUND)
        context.set_details("nothing here")
        return pb.ServerLiveResponse()

    async def not_implemented(request, context):
        context.set_code(grpc.StatusCode.UNIMPLEMENTED)
        context.set_details("Method not implemented!")
        raise NotImplementedError("Method not implemented!")

    async def fine(request, context):
        return pb.ServerLiveResponse(live=True)

    def serialize(response):
        return [response.SerializeToString()]

    methods = {
        f"/t.S/{handler.__name__}".encode(): h2.Method(handler, pb.ServerLiveRequest.FromString, serialize)
        for handler in (chooses, not_implemented, fine)
    }

    def client(port: int) -> list:
        outcomes = []
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            for name in ("chooses", "not_implemented", "fine"):
                call = channel.unary_unary(f"/t.S/{name}", response_deserializer=pb.ServerLiveResponse.FromString)
                try:
                    outcomes.append(("OK", call(b"", timeout=TIMEOUT_S).live))
                except grpc.RpcError as exc:
                    outcomes.append((exc.code().name, exc.details()))
        return outcomes

    async def main() -> list:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: h2.GrpcConnection(methods), "127.0.0.1", 0)
        try:
            return await loop.run_in_executor(None, client, server.sockets[0].getsockname()[1])
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(main()) == [
        ("NOT_FOUND", "nothing here"), ("UNIMPLEMENTED", "Method not implemented!"), ("OK", True)
    ]


def test_request_scanner_hands_odd_requests_to_protobuf():
    """The zero-copy request scanner gives way to protobuf's parser for what it does not read itself, keeping
    every tensor."""
    from pytriton.frontend.grpc.wire import parse_infer_request

    many = pb.ModelInferRequest(model_name="m", id="many")
    for i in range(10_000):  # more top-level fields than the scanner walks in Python
        many.raw_input_contents.append(b"t%d" % i)
    parsed = parse_infer_request(many.SerializeToString())
    assert parsed.id == "many" and len(parsed.raw_input_contents) == 10_000
    assert bytes(parsed.raw_input_contents[9_999]) == b"t9999"
    usual = pb.ModelInferRequest(model_name="m", id="usual")
    usual.raw_input_contents.extend([b"a" * 100, b"b" * 3])
    parsed = parse_infer_request(usual.SerializeToString())
    assert isinstance(parsed.raw_input_contents[0], memoryview)  # the usual case stays zero-copy
    assert [bytes(r) for r in parsed.raw_input_contents] == [b"a" * 100, b"b" * 3] and parsed.id == "usual"


@h2_only
def test_large_response_to_a_slow_reader_keeps_its_bytes(servers):
    """A client with large HTTP/2 windows that reads slowly leaves most of a 15 MB answer in the server's transport
    buffer, where Python 3.12 keeps a view of the worker's output segment: the segment must not be reused for the
    next answers before those bytes are sent."""
    url = servers["identity"].grpc_url
    size = 3_800_000  # 15 MB: beyond the kernel's socket buffers, within the worker's shared arena (< 16 MiB)
    host, port = url.rsplit(":", 1)
    raw = RawH2(url)
    raw.sock.close()
    raw.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    raw.sock.settimeout(TIMEOUT_S)
    raw.sock.connect((host, int(port)))
    try:
        # SETTINGS_INITIAL_WINDOW_SIZE and SETTINGS_MAX_FRAME_SIZE at their largest: the whole answer is written at
        # once, in frames that are views of the worker's output
        settings = struct.pack(">HLHL", 4, 0x7FFFFFFF, 5, (1 << 24) - 1)
        raw.sock.sendall(PREFACE + frame(SETTINGS, 0, 0, settings)
                         + frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", 0x7FFFFFFF - 65535)))
        request = pb.ModelInferRequest(model_name="identity")
        request.inputs.add(name="IN_FP32", datatype="FP32", shape=[size])
        request.raw_input_contents.append(np.full(size, 1.0, dtype=np.float32).tobytes())
        message = grpc_message(request.SerializeToString())
        block = raw.request_headers("/inference.GRPCInferenceService/ModelInfer")
        chunks = [message[i : i + (8 << 20)] for i in range(0, len(message), 8 << 20)]
        raw.sock.sendall(frame(HEADERS, END_HEADERS, 1, block)
                         + b"".join(frame(DATA, END_STREAM if i == len(chunks) - 1 else 0, 1, c)
                                    for i, c in enumerate(chunks)))
        # The answer is being written: its bytes fill this socket's buffer (far past the few control frames), and
        # the server's transport holds the rest.
        wait_until(lambda: unread_bytes(raw.sock) > 32 * 1024, "the answer fills the slow reader's buffer")
        with grpcclient.InferenceServerClient(url) as client:
            for value in (2.0, 3.0, 4.0):  # meanwhile the worker answers others, reusing freed segments
                other = np.full(size, value, dtype=np.float32)
                result = client.infer("identity", [fp32_input("IN_FP32", other)], client_timeout=TIMEOUT_S)
                np.testing.assert_array_equal(result.as_numpy("OUT_FP32"), other)
        _, data, trailers = raw.answer(1)
        assert trailers["grpc-status"] == "0"
        (reply,) = messages(data)
        output = np.frombuffer(pb.ModelInferResponse.FromString(reply).raw_output_contents[0], dtype=np.float32)
        np.testing.assert_array_equal(output, np.full(size, 1.0, dtype=np.float32))
    finally:
        raw.close()


def test_grpc_port_in_use_is_reported():
    result, port = serve_on_a_taken_port("tests.models:identity", *IDENTITY, "--grpc-address", "127.0.0.1",
                                         "--grpc-port", "{port}", "--http-port", "0", "--metrics-port", "0")
    assert result.returncode != 0
    assert f"cannot listen for gRPC on 127.0.0.1:{port}" in result.stdout + result.stderr
