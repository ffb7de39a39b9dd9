"""Sequence parameters travel to the worker in the request's fields (correlation id, flags) instead of the parameters
map; the model sees the same parameters either way."""

from __future__ import annotations

import types

import pytest

from pytriton.core.types import ExecutionRequest
from pytriton.proxy.endpoint import WorkerEndpoint
from pytriton.proxy.messages import (
    ServerToWorker,
    carry_sequence_parameters,
    encode_request_fields,
    params_to_proto,
    sequence_fields,
)
from pytriton.supervisor.instance import to_request_data

CASES = [
    {},
    {"custom": "v", "n": 3},
    {"sequence_id": 42, "sequence_start": True, "sequence_end": False},
    {"sequence_id": 42, "sequence_start": False, "sequence_end": False},
    {"sequence_id": 7, "sequence_end": True, "custom": 1.5},
    {"sequence_id": "session-7", "sequence_start": True},
    {"sequence_id": -3, "sequence_start": True},  # (the map keeps what the fields do not carry exactly)
    {"sequence_id": 1 << 63},
    {"sequence_id": 0, "sequence_start": True},
    {"sequence_id": "", "sequence_end": True},
    {"sequence_id": True},
    {"sequence_start": 1, "sequence_end": "yes"},
    {"sequence_start": True},
]


def _through_the_worker_protocol(parameters: dict):
    """What the worker's decode gives the model for a request with these parameters, and the map that travelled."""
    data = to_request_data(ExecutionRequest([], {}, [], {}, parameters))
    message = ServerToWorker(kind=ServerToWorker.INFER, id=1)
    item = message.requests.add()
    if data.parameters:
        params_to_proto(data.parameters, item.parameters)
    encode_request_fields(data, item)
    received = ServerToWorker.FromString(message.SerializeToString())
    stub = types.SimpleNamespace(_decode_inputs=lambda item, views: {})
    decoded, _, failed = WorkerEndpoint._decode(stub, received, [])  # type: ignore[arg-type]
    assert failed == [""]
    return decoded[0], data.parameters


@pytest.mark.parametrize("parameters", CASES)
def test_the_model_sees_the_client_parameters(parameters):
    request, sent = _through_the_worker_protocol(dict(parameters))
    correlation_id, flags = sequence_fields(parameters)
    assert request.parameters == parameters
    assert request.flags == flags  # (the client's START / END only)
    if correlation_id != "" and not (isinstance(correlation_id, int) and correlation_id < 0):  # (as ever: "" is
        assert request.correlation_id == correlation_id  # 0 on the wire, a negative id wraps to uint64)


def test_the_map_carries_only_what_the_fields_cannot():
    _, sent = _through_the_worker_protocol({"sequence_id": 42, "sequence_start": False, "sequence_end": True})
    assert sent == {}
    _, sent = _through_the_worker_protocol({"sequence_id": -3, "custom": "v", "sequence_end": True})
    assert sent == {"sequence_id": -3, "custom": "v"}
    parameters = {"sequence_id": 5}
    rest, _, _ = carry_sequence_parameters(parameters)
    assert rest == {} and parameters == {"sequence_id": 5}  # (the request's own dict is left alone)
