"""ModelInfer response headers come from a cache of serialised headers: byte for byte what protobuf writes."""

from __future__ import annotations

import numpy as np
import pytest

from pytriton.core.types import InferResponse, Tensor
from pytriton.frontend.grpc import _convert
from pytriton.frontend.grpc._convert import to_infer_response
from pytriton.frontend.grpc.wire import infer_response_chunks

pb = pytest.importorskip("tritonclient.grpc").service_pb2


def _expected(response: InferResponse) -> bytes:
    message = pb.ModelInferResponse(model_name=response.model_name, model_version=response.model_version,
                                    id=response.id)
    for tensor in response.outputs:
        out = message.outputs.add(name=tensor.name, datatype=tensor.datatype)
        out.shape.extend(tensor.shape)
    for key, value in response.parameters.items():
        _convert.set_param(message.parameters[key], value)
    for tensor in response.outputs:
        message.raw_output_contents.append(b"" if tensor.data is None else bytes(tensor.data))
    return message.SerializeToString()


def _response(rid: str, rows: int, parameters: dict | None = None, model: str = "m") -> InferResponse:
    data = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
    return InferResponse(model_name=model, model_version="1", id=rid,
                         outputs=[Tensor("OUT", "FP32", (rows, 4), data.data.cast("B")),
                                  Tensor("IN_REGION", "INT32", (rows,), None)],
                         parameters=parameters or {})


@pytest.mark.parametrize("rid", ["", "a", "x" * 200, "ünï"])
def test_cached_header_is_protobufs_serialisation(rid):
    """Every call (the first fills the cache, later ones read it) gives protobuf's bytes; the id is spliced in."""
    _convert._HEADERS.clear()
    for rows in (1, 3, 1):
        response = _response(rid, rows)
        wire = to_infer_response(response)
        assert b"".join(bytes(c) for c in infer_response_chunks(wire)) == _expected(response)
        assert wire.header.id == rid and list(wire.header.outputs[0].shape) == [rows, 4]
    assert len(_convert._HEADERS) == 2  # one per shape, whatever the id


def test_parameters_and_changed_header():
    """Responses with parameters are not cached; a header read (and changed) after caching is what goes out."""
    _convert._HEADERS.clear()
    response = _response("r", 2, {"sequence_id": 7, "flag": True})
    assert b"".join(bytes(c) for c in infer_response_chunks(to_infer_response(response))) == _expected(response)
    assert not _convert._HEADERS
    wire = to_infer_response(_response("r", 2))
    wire.parameters["triton_final_response"].bool_param = True
    parsed = pb.ModelInferResponse.FromString(b"".join(bytes(c) for c in infer_response_chunks(wire)))
    assert parsed.parameters["triton_final_response"].bool_param and parsed.id == "r"
    assert np.frombuffer(parsed.raw_output_contents[0], np.float32).tolist() == list(range(8))


def test_cache_is_bounded():
    _convert._HEADERS.clear()
    for index in range(_convert._HEADERS_MAX + 5):
        to_infer_response(_response("", 1, model=f"m{index}"))
    assert len(_convert._HEADERS) <= _convert._HEADERS_MAX
