"""A Python model's error response keeps its TritonError code, as Triton answers it: the client sees that code's gRPC
status / HTTP status code with the model's message; a TritonError made without a code is INTERNAL (Triton's
default)."""

from __future__ import annotations

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve

# pb_utils.TritonError code -> (gRPC status, HTTP status code), as Triton maps TRITONSERVER_Error_Code
EXPECTED = {
    -1: ("StatusCode.INTERNAL", "500"),  # TritonError(message): INTERNAL
    0: ("StatusCode.UNKNOWN", "400"),
    1: ("StatusCode.INTERNAL", "500"),
    2: ("StatusCode.NOT_FOUND", "404"),
    3: ("StatusCode.INVALID_ARGUMENT", "400"),
    4: ("StatusCode.UNAVAILABLE", "503"),
    5: ("StatusCode.UNIMPLEMENTED", "501"),
    99: ("StatusCode.INTERNAL", "500"),  # not a code: INTERNAL
}


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPO / "tests" / "repositories" / "pyfix")) as s:
        yield s


@pytest.mark.parametrize("protocol", ["grpc", "http"])
@pytest.mark.parametrize("code", sorted(EXPECTED))
def test_error_response_keeps_its_code(server, protocol, code):
    module = CLIENTS[protocol]
    client = client_for(server, protocol)
    tensor = module.InferInput("CODE", [1], "INT32")
    tensor.set_data_from_numpy(np.array([code], dtype=np.int32))
    with pytest.raises(InferenceServerException) as caught:
        client.infer("coded_error", [tensor])
    assert caught.value.status() == EXPECTED[code][0 if protocol == "grpc" else 1]
    assert f"refused with code {code}" in caught.value.message()
    assert client.is_server_live()
