"""KServeGrpc's keepalive, ping-policy and compression options take effect (Triton's field names): the front-end
pings a quiet client, refuses PINGs past the strikes, and gzips infer responses. TritonConfig's fields of the
same settings become the server's gRPC limits."""

from __future__ import annotations

import gzip
import logging
import time

import numpy
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

import pytriton.tritonserver as tritonserver
from pytriton.config.h2 import H2Limits
from pytriton.config.server import ServerConfig
from pytriton.config.triton_config import TritonConfig, TritonSecurityConfig, server_config
from pytriton.exceptions import PyTritonValidationError
from pytriton.tritonfrontend import KServeGrpc
from tests._support.paths import REPOSITORIES
from tests.frontend.grpc.raw_h2 import ACK, ENHANCE_YOUR_CALM, GOAWAY, PING, RawH2, grpc_message, ping

MODELS = str(REPOSITORIES / "models")
LOCAL = "127.0.0.1"


@pytest.fixture(scope="module")
def server():
    server = tritonserver.Server(model_repository=MODELS, exit_timeout=5).start(wait_until_ready=True, timeout=60)
    yield server
    server.stop()


def test_kservegrpc_keepalive_and_compression_options(server):
    options = KServeGrpc.Options(address=LOCAL, port=0, keepalive_time_ms=300, keepalive_timeout_ms=10_000,
                                 keepalive_permit_without_calls=True, http2_max_pings_without_data=0,
                                 http2_min_recv_ping_interval_without_data_ms=60_000, http2_max_ping_strikes=1,
                                 infer_compression_level=KServeGrpc.Grpc_compression_level.LOW)
    with KServeGrpc(server, options) as frontend:
        port = frontend.port
        with RawH2(port) as raw:
            raw.handshake()
            start = time.monotonic()
            for _ in range(2):  # the front-end pings a quiet client (permitted without calls)
                item = raw.wait_for(lambda f: f.type == PING and not f.flags & ACK, "a server PING", 5.0)
                raw.send(ping(item.payload, ack=True))
            assert 0.5 <= time.monotonic() - start < 5.0
            for _ in range(2):  # one free PING, one strike
                raw.send(ping())
                raw.expect_ping_ack()
            raw.send(ping())  # the second strike: past http2_max_ping_strikes
            item = raw.expect_connection_error(ENHANCE_YOUR_CALM)
            assert item.type == GOAWAY and item.payload[8:] == b"too_many_pings"
        request = service_pb2.ModelInferRequest(model_name="add_sub")
        for name in ("INPUT0", "INPUT1"):
            request.inputs.add(name=name, datatype="FP32", shape=[1, 4])
            request.raw_input_contents.append(numpy.zeros((1, 4), numpy.float32).tobytes())
        with RawH2(port) as raw:
            raw.handshake()
            raw.headers(1, raw.grpc_request("ModelInfer", [("grpc-accept-encoding", "gzip")]), end_stream=False)
            raw.data(1, grpc_message(request.SerializeToString()))
            headers, message, trailers = raw.answer(1)
        assert trailers["grpc-status"] == "0" and headers["grpc-encoding"] == "gzip" and message[0] == 1
        response = service_pb2.ModelInferResponse.FromString(gzip.decompress(message[5:]))
        assert [output.name for output in response.outputs] == ["OUTPUT0", "OUTPUT1"]
        with grpcclient.InferenceServerClient(f"{LOCAL}:{port}") as client:
            inputs = [grpcclient.InferInput(n, [1, 4], "FP32") for n in ("INPUT0", "INPUT1")]
            for tensor, value in zip(inputs, (3.0, 1.0)):
                tensor.set_data_from_numpy(numpy.full((1, 4), value, numpy.float32))
            assert client.infer("add_sub", inputs).as_numpy("OUTPUT0").tolist() == [[4.0] * 4]


def test_kservegrpc_unknown_compression_level_refused(server):
    with pytest.raises(tritonserver.UnsupportedError, match="infer_compression_level"):
        KServeGrpc(server, KServeGrpc.Options(address=LOCAL, port=0, infer_compression_level=7))


def test_triton_config_fields_become_grpc_limits(caplog):
    config = TritonConfig(grpc_keepalive_time=10_000, grpc_keepalive_timeout=2_000,
                          grpc_keepalive_permit_without_calls=True, grpc_http2_max_pings_without_data=0,
                          grpc_http2_min_recv_ping_interval_without_data=5_000, grpc_http2_max_ping_strikes=3,
                          grpc_infer_response_compression_level="HIGH")
    with caplog.at_level(logging.WARNING, logger="pytriton.triton"):
        limits = server_config(config, TritonSecurityConfig()).grpc_limits
    assert "has no effect" not in caplog.text
    assert limits == H2Limits(keepalive_time_s=10.0, keepalive_timeout_s=2.0, keepalive_permit_without_calls=True,
                              max_pings_without_data=0, min_ping_interval_s=5.0, max_ping_strikes=3,
                              infer_response_compression="high")
    assert server_config(TritonConfig(), TritonSecurityConfig()).grpc_limits == H2Limits()  # Triton's defaults
    sent = server_config(config, TritonSecurityConfig())  # as the server process receives it
    assert ServerConfig.from_json(sent.to_json()).grpc_limits == limits
    with pytest.raises(PyTritonValidationError, match="grpc_infer_response_compression_level"):
        TritonConfig(grpc_infer_response_compression_level="max")
    with pytest.raises(PyTritonValidationError, match="grpc_keepalive_timeout"):
        TritonConfig(grpc_keepalive_timeout=-1)
    assert TritonConfig.from_dict({"grpc_keepalive_permit_without_calls": "true"}).grpc_keepalive_permit_without_calls
