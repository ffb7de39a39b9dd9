"""The real tritonclient.http against the HTTP callback route: binary and JSON inputs, binary and JSON outputs,
compressed requests and answers (the coroutine route) mixed on one client, concurrent async requests over its
pooled connections, request ids and parameters: every answer is the model's for its own request."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._support.serving import serve, tensor_args

ARGS = tensor_args("input", [("IN_X", "fp32", "-1"), ("IN_T", "bytes", "-1")]) + tensor_args(
    "output", [("OUT_X", "fp32", "-1"), ("OUT_T", "bytes", "-1")]
)


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:identity", *ARGS) as running:
        yield running


def _inputs(n: int, binary: bool = True) -> tuple[list[httpclient.InferInput], np.ndarray, np.ndarray]:
    x = np.arange(n, dtype=np.float32) + n
    t = np.array([f"t{n}-{i}".encode() for i in range(2)], dtype=np.object_)
    a = httpclient.InferInput("IN_X", [n], "FP32")
    a.set_data_from_numpy(x, binary_data=binary)
    b = httpclient.InferInput("IN_T", [2], "BYTES")
    b.set_data_from_numpy(t, binary_data=binary)
    return [a, b], x, t


def test_tritonclient_answers_on_the_callback_route(server):
    with httpclient.InferenceServerClient(server.http_url, concurrency=4) as client:
        for round_ in range(3):
            for n in (1, 3, 64):
                for binary in (True, False):
                    for compression in (None, "gzip", "deflate"):
                        for binary_out in (True, False):
                            inputs, x, t = _inputs(n, binary)
                            outputs = [httpclient.InferRequestedOutput("OUT_X", binary_data=binary_out),
                                       httpclient.InferRequestedOutput("OUT_T", binary_data=binary_out)]
                            result = client.infer("identity", inputs, outputs=outputs, request_id=f"r{round_}-{n}",
                                                  parameters={"p": n}, request_compression_algorithm=compression,
                                                  response_compression_algorithm=compression)
                            np.testing.assert_array_equal(result.as_numpy("OUT_X"), x)
                            texts = [v if isinstance(v, bytes) else v.encode() for v in result.as_numpy("OUT_T")]
                            assert texts == t.tolist()  # (JSON outputs come back as str)
                            assert result.get_response()["id"] == f"r{round_}-{n}"
        # concurrent requests on the client's pool: each answer is its own request's
        pending = []
        for n in range(1, 41):
            inputs, x, t = _inputs(n)
            pending.append((client.async_infer("identity", inputs, request_id=str(n)), x, t, str(n)))
        for future, x, t, request_id in pending:
            result = future.get_result()
            np.testing.assert_array_equal(result.as_numpy("OUT_X"), x)
            assert result.as_numpy("OUT_T").tolist() == t.tolist()
            assert result.get_response()["id"] == request_id
        # a refused request between good ones, same client
        inputs, x, _ = _inputs(4)
        inputs[0]._raw_data = inputs[0]._raw_data[:12]
        inputs[0]._parameters["binary_data_size"] = 12
        with pytest.raises(InferenceServerException) as caught:
            client.infer("identity", inputs)
        assert "input byte size mismatch for input 'IN_X'" in caught.value.message()
        inputs, x, _ = _inputs(4)
        np.testing.assert_array_equal(client.infer("identity", inputs).as_numpy("OUT_X"), x)
