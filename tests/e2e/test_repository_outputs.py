"""Outputs of a repository model whose numpy datatype or shape differs from config.pbtxt: sent as the tensor is, as
Triton's Python backend sends them (Triton's bls_decoupled example sums into an int64 array for a TYPE_INT32 output;
its QA models that run a unittest inside answer FP16 [1] for an FP32 [16] output), with one warning in the server's
log."""

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


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_an_output_goes_out_with_the_shape_the_model_made(server, protocol):
    client = client_for(server, protocol)
    result = client.infer("unittest_flag", [])
    flag = result.as_numpy("OUTPUT0")
    assert flag.dtype == np.float16 and flag.tolist() == [1.0]
    output = result.get_output("OUTPUT0")
    assert (output["shape"] if protocol == "http" else list(output.shape)) == [1]
    assert server.wait_for_log("output 'OUTPUT0' of model 'unittest_flag' has shape [1], but its config.pbtxt "
                               "declares [16]: sent as it is, as Triton does")
    assert server.log.count("output 'OUTPUT0' of model 'unittest_flag' has shape") == 1  # once, not per request


# (output, shape the model returns): none is the shape config.pbtxt declares (max_batch_size 64; OUT dims [-1], FIXED
# dims [2]); Triton 2.51's Python backend sends each as the model made it (init_args of its QA answers [1] for OUT).
ANY_SHAPE = [("OUT", [1]), ("OUT", [1, 2, 3]), ("OUT", []), ("FIXED", [1, 3]), ("FIXED", [2]), ("FIXED", [3, 2])]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
@pytest.mark.parametrize(("output", "shape"), ANY_SHAPE)
def test_an_output_of_any_rank_goes_out_as_the_model_made_it(server, protocol, output, shape):
    lib = CLIENTS[protocol]
    tensor = lib.InferInput("IN", [1, 2], "FP32")
    tensor.set_data_from_numpy(np.zeros([1, 2], dtype=np.float32))
    result = client_for(server, protocol).infer(
        "any_shape", [tensor], parameters={"output": output, "shape": ",".join(map(str, shape))})
    assert result.as_numpy(output).shape == tuple(shape)
    described = result.get_output(output)
    assert list(described["shape"] if protocol == "http" else described.shape) == shape


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_an_output_with_a_reshape_must_have_the_reshape_shape(server, protocol):
    # (its dims are worked out from the reshape's; Triton 2.51 sends a wrong shape here, or stops)
    lib = CLIENTS[protocol]
    tensor = lib.InferInput("IN", [1, 2], "FP32")
    tensor.set_data_from_numpy(np.zeros([1, 2], dtype=np.float32))
    with pytest.raises(lib.InferenceServerException, match=r"output 'RESHAPED' of model 'any_shape' has shape "
                                                           r"\[1, 3\], but its config.pbtxt declares \[-1, 1, 2\] "
                                                           r"\(its reshape\)"):
        client_for(server, protocol).infer("any_shape", [tensor], parameters={"output": "RESHAPED", "shape": "1,3"})
    result = client_for(server, protocol).infer("any_shape", [tensor],
                                                parameters={"output": "RESHAPED", "shape": "1,1,2"})
    assert result.as_numpy("RESHAPED").shape == (1, 2)  # (sent as its dims)
