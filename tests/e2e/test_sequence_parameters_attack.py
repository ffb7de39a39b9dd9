"""The gRPC sequence fast path (the scan's cache of parameter entries, the header template, the worker protocol's
sequence flags) attacked with many requests through tritonclient: ids of every kind (small, 2^63-1, negative, text,
text longer than the cache takes, the empty string), START and END alone and together, request ids, custom parameters
between them, in a shuffled order that repeats entries: the model sees exactly each request's own parameters."""

from __future__ import annotations

import random

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests._support.serving import serve, tensor_args

ECHO = tensor_args("input", [("INPUT", "fp32", "4"), ("TEXT", "bytes", "2")]) \
    + tensor_args("output", [("PARAMS", "bytes", "1")])


@pytest.fixture(scope="module")
def server():
    with serve("tests.models:echo_parameters", *ECHO) as process:
        yield process


def _inputs() -> list:
    x = grpcclient.InferInput("INPUT", [4], "FP32")
    x.set_data_from_numpy(np.zeros(4, dtype=np.float32))
    text = grpcclient.InferInput("TEXT", [2], "BYTES")
    text.set_data_from_numpy(np.array([b"a", b"b"], dtype=object))
    return [x, text]


def _cases() -> list[tuple[dict, dict]]:
    """(tritonclient's keyword arguments, the parameters the model is to see)."""
    ids: list = [1, 2, 17, 2**63 - 1, -1, -(2**63), "s", "session-é", "x" * 300, "y" * 300]
    cases = []
    for sequence_id in ids:
        for start, end in ((False, False), (True, False), (False, True), (True, True)):
            for custom in (None, {"custom": "v"}):
                kwargs = {"sequence_id": sequence_id, "sequence_start": start, "sequence_end": end}
                seen: dict = {"sequence_id": sequence_id, "sequence_start": start, "sequence_end": end}
                if custom is not None:
                    kwargs["parameters"] = custom
                    seen.update(custom)
                cases.append((kwargs, seen))
    # (tritonclient sends no sequence parameter at all for the ids 0 and "")
    cases.append(({"sequence_id": 0, "sequence_start": True}, {}))
    cases.append(({"sequence_id": "", "sequence_end": True, "parameters": {"custom": "w"}}, {"custom": "w"}))
    return cases


def test_each_request_sees_its_own_sequence_parameters(server):
    cases = _cases() * 3
    random.Random(5).shuffle(cases)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        for number, (kwargs, seen) in enumerate(cases):
            request_id = str(number) if number % 3 else ""
            result = client.infer("echo_parameters", _inputs(), request_id=request_id, **kwargs)
            expected = ";".join(f"{k}={v!r}" for k, v in sorted(seen.items()))
            assert result.as_numpy("PARAMS")[0].decode() == expected, kwargs
            assert result.get_response().id == request_id
    finally:
        client.close()
