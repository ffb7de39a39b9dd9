"""A Python-backend model that does not return an output the client asked for: the answer leaves it out, as
tritonserver 2.51's Python backend does (compared side by side; Triton's qa/L0_optional_input relies on it), and in
an ensemble the next step gets no such input (allowed when that input is optional). The request failed before."""

from __future__ import annotations

import numpy as np
import pytest

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve


@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPO / "tests" / "repositories" / "optional_outputs")) as s:
        yield s


@pytest.mark.parametrize("protocol", ["grpc", "http"])
@pytest.mark.parametrize("model", ["given", "given_twice"])
def test_a_requested_output_the_model_did_not_return_is_left_out(server, protocol, model):
    lib = CLIENTS[protocol]
    client = client_for(server, protocol)
    given = lib.InferInput("INPUT1", [1, 1], "FP32")
    given.set_data_from_numpy(np.array([[7]], dtype=np.float32))
    asked = [lib.InferRequestedOutput("OUTPUT0"), lib.InferRequestedOutput("OUTPUT1")]
    for outputs in (asked, None):
        result = client.infer(model, [given], outputs=outputs)
        assert result.as_numpy("OUTPUT0") is None
        assert result.as_numpy("OUTPUT1").tolist() == [[7]]
