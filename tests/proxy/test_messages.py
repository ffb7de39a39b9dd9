"""The worker protocol's header messages and parameter maps survive a round trip."""

from __future__ import annotations

from pytriton.model_config.datatypes import CODE_TO_TRITON, TRITON_TO_CODE
from pytriton.proxy.messages import ServerToWorker, WorkerToServer, params_from_proto, params_to_proto


def test_request_header_round_trip():
    message = ServerToWorker(kind=ServerToWorker.INFER, id=42)
    item = message.requests.add()
    ref = item.inputs.add(name="INPUT0", dtype=TRITON_TO_CODE["FP32"], nbytes=64, frame=1)
    ref.shape.extend([1, 16])
    big = item.inputs.add(name="INPUT1", dtype=TRITON_TO_CODE["BYTES"], nbytes=1 << 20, segment=3, offset=4096)
    big.shape.extend([2])
    item.requested_outputs.extend(["OUT"])
    params_to_proto({"a": 1, "b": True, "c": 1.5, "d": "x", "big": 1 << 63}, item.parameters)
    message.freed.extend([(5 << 40) | 128, 7])

    decoded = ServerToWorker.FromString(message.SerializeToString())
    assert decoded.kind == ServerToWorker.INFER and decoded.id == 42
    first, second = decoded.requests[0].inputs
    assert (first.name, CODE_TO_TRITON[first.dtype], list(first.shape), first.frame) == ("INPUT0", "FP32", [1, 16], 1)
    assert (second.segment, second.offset, second.nbytes, second.frame) == (3, 4096, 1 << 20, 0)
    assert CODE_TO_TRITON[second.dtype] == "BYTES"
    assert params_from_proto(decoded.requests[0].parameters) == {"a": 1, "b": True, "c": 1.5, "d": "x", "big": 1 << 63}
    assert list(decoded.freed) == [(5 << 40) | 128, 7]


def test_response_header_round_trip():
    message = WorkerToServer(kind=WorkerToServer.RESULT, id=7, final=True, compute_infer_ns=123)
    item = message.responses.add()
    item.outputs.add(name="OUT", dtype=TRITON_TO_CODE["INT64"], nbytes=8, frame=1).shape.extend([1])
    message.responses.add(error="boom")
    decoded = WorkerToServer.FromString(message.SerializeToString())
    assert decoded.final and decoded.compute_infer_ns == 123
    assert decoded.responses[0].outputs[0].name == "OUT"
    assert decoded.responses[1].error == "boom"


def test_datatype_codes_are_a_bijection():
    assert len(set(TRITON_TO_CODE.values())) == len(TRITON_TO_CODE) == 14
    assert all(CODE_TO_TRITON[code] == name for name, code in TRITON_TO_CODE.items())
