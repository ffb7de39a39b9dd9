"""Endpoint groups restricted behind an access token, over HTTP and gRPC, with the real clients."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.conftest import serve, tensor_args

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
