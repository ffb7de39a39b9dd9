"""Outputs of a repository model whose numpy datatype differs from config.pbtxt: sent with the tensor's own
datatype, as Triton's Python backend sends them (Triton's bls_decoupled example sums into an int64 array for a
TYPE_INT32 output), with one warning in the server's log."""

from __future__ import annotations

import numpy as np
import pytest

from tests._support.clients import CLIENTS, client_for
from tests._support.paths import REPO
from tests._support.serving import serve



@pytest.fixture(scope="module")
def server():
    with serve("--model-repository", str(REPO / "tests" / "repositories" / "outputs")) as s:
        yield s


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_an_output_goes_out_with_the_datatype_the_model_made(server, protocol):
    lib = CLIENTS[protocol]
    client = client_for(server, protocol)
    tensor = lib.InferInput("N", [1], "INT32")
    tensor.set_data_from_numpy(np.array([4], dtype=np.int32))
    result = client.infer("count_up", [tensor])
    total = result.as_numpy("TOTAL")
    assert total.dtype == np.int64 and total.tolist() == [10]
    output = result.get_output("TOTAL")
    assert (output["datatype"] if protocol == "http" else output.datatype) == "INT64"
    assert server.wait_for_log("output 'TOTAL' of model 'count_up' has datatype INT64 (numpy int64), but its "
                               "config.pbtxt declares INT32: sent as INT64, as Triton does")
    assert server.log.count("output 'TOTAL' of model 'count_up' has datatype") == 1  # once, not per request
