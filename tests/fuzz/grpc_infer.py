"""The ModelInfer wire decoder (`frontend/grpc/_wire.parse_infer_request`), its conversion and the request's checks.

The decoder reads a message without protobuf where it can (the tensors as views of the message, headers it has
seen before from a template, sequence parameters from a cache). Its contract is to read every message as protobuf
would. So the oracle is protobuf itself: each input is read both ways, converted (`_convert.to_infer_request`) and
checked against a model's configuration (`core.validation`, the template path through `validate_layout`), and the
two must agree on the request or on the error. The fast path is taken three times per input from empty caches (the
first fills the template, the second uses it, the third comes after it), once from a bytearray (a message received
in place). Its own errors: protobuf's DecodeError (the transport answers "Exception deserializing request!") and
ServerError with INVALID_ARG.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2 as pb

from pytriton.core.types import InferRequest
from pytriton.core.validation import validate_layout, validate_request
from pytriton.exceptions import ServerError, Status
from pytriton.frontend.grpc import wire as _wire
from pytriton.frontend.grpc._convert import to_infer_request
from pytriton.model_config.triton_model_config import DynamicBatcher, TensorSpec, TritonModelConfig
from tests.fuzz.harness import Finding, Harness

MODELS = {
    "m": TritonModelConfig("m", inputs=[TensorSpec("INPUT", "FP32", (-1,))],
                           outputs=[TensorSpec("OUTPUT", "FP32", (-1,))], max_batch_size=8, batcher=DynamicBatcher()),
    "s": TritonModelConfig("s", inputs=[TensorSpec("TEXT", "BYTES", (1,)), TensorSpec("N", "INT32", (2,), True)],
                           outputs=[TensorSpec("OUT", "BYTES", (1,))]),
}


def _reset_caches() -> None:
    _wire.TEMPLATES.clear()
    _wire._ENTRIES.clear()
    _wire._last_plain = None
    _wire._last_scanned = None


def _request(request: InferRequest) -> tuple[Any, ...]:
    return (request.model_name, request.model_version, request.id, request.parameters,
            [(t.name, t.datatype, tuple(t.shape), None if t.data is None else bytes(t.data), t.region)
             for t in request.inputs],
            [(o.name, o.parameters) for o in request.outputs])


def _outcome(read: Any, data: Any, layouts: dict | None) -> tuple[Any, ...]:
    """What one way of reading `data` gives: ("ok", request, batch size or None) or ("error", kind, message)."""
    try:
        request = to_infer_request(read(data))
        config = MODELS.get(request.model_name)
        batch = None
        if config is not None:
            if request.layout is not None and layouts is not None:
                batch = validate_layout(config, request, layouts)[0]
            else:
                batch = validate_request(config, request)
        return ("ok", _request(request), batch)
    except DecodeError:
        return ("error", "DecodeError", "")
    except ServerError as exc:
        if exc.status is not Status.INVALID_ARG:
            raise
        return ("error", "INVALID_ARG", exc.message)


class GrpcInferHarness(Harness):
    name = "grpc_infer"
    max_len = 4096

    def one_input(self, data: bytes) -> None:
        expected = _outcome(pb.ModelInferRequest.FromString, data, None)
        _reset_caches()
        layouts: dict = {}
        for round_, message in enumerate((data, data, data, bytearray(data))):
            got = _outcome(_wire.parse_infer_request, message, layouts)
            if got != expected:
                raise Finding("decoder disagrees with protobuf",
                              f"round {round_ + 1}: protobuf {expected!r}, decoder {got!r}")
        _reset_caches()
