"""Endpoint groups restricted behind an access token, over HTTP and gRPC, with the real clients."""

from __future__ import annotations

import threading

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests._support.serving import serve, tensor_args

TOKEN = "s3cret-token"
ARGS = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")]) + [
    "--http-restricted-api", f"shared-memory,statistics,logging:triton-access-token={TOKEN}",
    "--grpc-restricted-protocol", f"shared-memory,statistics,logging:triton-access-token={TOKEN}",
]


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:identity", *ARGS) as s:
        yield s


def test_http_restricted_groups(server):
    client = httpclient.InferenceServerClient(server.http_url)
    for call in (client.get_system_shared_memory_status, lambda **kw: client.get_inference_statistics("identity", **kw),
                 client.get_log_settings, client.unregister_system_shared_memory):
        with pytest.raises(InferenceServerException) as info:
            call()
        assert info.value.status() == "403"
        assert info.value.message() == "This API is restricted, expecting header 'triton-access-token'"
        call(headers={"triton-access-token": TOKEN})
    with pytest.raises(InferenceServerException):
        client.get_log_settings(headers={"triton-access-token": "wrong"})
    # groups not listed stay open
    tensor = httpclient.InferInput("IN_X", [2], "FP32")
    tensor.set_data_from_numpy(np.ones(2, dtype=np.float32))
    assert client.infer("identity", [tensor]).as_numpy("OUT_X").tolist() == [1, 1]
    assert client.get_model_config("identity")["name"] == "identity"


def test_grpc_restricted_groups(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    header = {"triton-grpc-protocol-triton-access-token": TOKEN}
    for call in (client.get_system_shared_memory_status, lambda **kw: client.get_inference_statistics("identity", **kw),
                 client.get_log_settings, client.unregister_cuda_shared_memory):
        with pytest.raises(InferenceServerException) as info:
            call()
        assert info.value.status() == "StatusCode.UNAVAILABLE"
        assert info.value.message() == (
            "This protocol is restricted, expecting header 'triton-grpc-protocol-triton-access-token'"
        )
        call(headers=header)
    tensor = grpcclient.InferInput("IN_X", [2], "FP32")
    tensor.set_data_from_numpy(np.ones(2, dtype=np.float32))
    assert client.infer("identity", [tensor]).as_numpy("OUT_X").tolist() == [1, 1]


# ---- a restricted inference group and streams -------------------------------------------------------------------

@pytest.fixture(scope="module")
def inference_restricted():
    args = tensor_args("input", [("IN_X", "fp32", "-1")]) + tensor_args("output", [("OUT_X", "fp32", "-1")]) + [
        "--grpc-restricted-protocol", f"inference:triton-access-token={TOKEN}",
    ]
    with serve("tests.models:identity", *args) as s:
        yield s


def _stream_request() -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="identity")
    request.inputs.add(name="IN_X", datatype="FP32", shape=[2])
    request.raw_input_contents.append(np.ones(2, dtype=np.float32).tobytes())
    return request


def test_grpc_stream_without_header_ends_at_once(inference_restricted):
    """Triton ends a ModelStreamInfer stream that lacks the header before reading any request."""
    channel = grpc.insecure_channel(inference_restricted.grpc_url)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    never_sent = threading.Event()

    def requests():  # the client sends nothing until the stream has ended
        never_sent.wait(30)
        return
        yield

    try:
        with pytest.raises(grpc.RpcError) as info:
            list(stub.ModelStreamInfer(requests(), timeout=20))
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        assert info.value.details() == (
            "This protocol is restricted, expecting header 'triton-grpc-protocol-triton-access-token'"
        )
        metadata = (("triton-grpc-protocol-triton-access-token", TOKEN),)
        [response] = list(stub.ModelStreamInfer(iter([_stream_request()]), metadata=metadata, timeout=20))
        assert response.error_message == ""
        assert np.frombuffer(response.infer_response.raw_output_contents[0], np.float32).tolist() == [1, 1]
    finally:
        never_sent.set()
        channel.close()


def test_grpc_unary_inference_restricted(inference_restricted):
    client = grpcclient.InferenceServerClient(inference_restricted.grpc_url)
    tensor = grpcclient.InferInput("IN_X", [2], "FP32")
    tensor.set_data_from_numpy(np.ones(2, dtype=np.float32))
    with pytest.raises(InferenceServerException) as info:
        client.infer("identity", [tensor])
    assert info.value.status() == "StatusCode.UNAVAILABLE"
    headers = {"triton-grpc-protocol-triton-access-token": TOKEN}
    assert client.infer("identity", [tensor], headers=headers).as_numpy("OUT_X").tolist() == [1, 1]
