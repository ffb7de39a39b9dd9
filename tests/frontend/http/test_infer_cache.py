"""`HeaderCache`: a kept JSON header gives the request `parse_infer_request` gives, checks every body's binary part
against the header's sizes with its messages, and stays within its bound."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from pytriton.exceptions import ServerError
from pytriton.frontend.http.infer import parse_infer_request
from pytriton.frontend.http.infer_cache import HeaderCache


def header(sizes=(64,), outputs=({"name": "OUT", "parameters": {"binary_data": True}},), parameters=None,
           request_id="r1") -> bytes:  # fmt: skip
    obj: dict = {"id": request_id, "inputs": [
        {"name": f"IN{i}", "datatype": "FP32", "shape": [1, size // 4], "parameters": {"binary_data_size": size}}
        for i, size in enumerate(sizes)
    ], "outputs": list(outputs)}
    if parameters is not None:
        obj["parameters"] = parameters
    return orjson.dumps(obj)


def body(head: bytes, *tensors: bytes) -> bytes:
    return head + b"".join(tensors)


def parse(cache: HeaderCache, data: bytes, head: bytes):
    return cache.parse("m", "", data, len(head), None)


def as_plain(request):
    return (request.model_name, request.model_version, request.id,
            [(t.name, t.datatype, t.shape, bytes(t.data)) for t in request.inputs],
            [(o.name, o.parameters) for o in request.outputs], request.parameters)


def test_kept_header_gives_the_same_request_and_its_own_data():
    cache = HeaderCache()
    head = header(sizes=(64, 8), parameters={"priority": 2, "binary_data_output": True})
    first_data = [np.arange(16, dtype=np.float32).tobytes(), b"\x01" * 8]
    second_data = [np.ones(16, dtype=np.float32).tobytes(), b"\x02" * 8]
    first, binary_first = parse(cache, body(head, *first_data), head)
    second, binary_second = parse(cache, body(head, *second_data), head)
    reference, binary_reference = parse_infer_request("m", "", body(head, *second_data), len(head), None)
    assert len(cache) == 1
    assert first.layout is not None and second.layout is first.layout  # one layout for the core
    assert as_plain(second) == as_plain(reference) and binary_second == binary_reference == binary_first is True
    assert [bytes(t.data) for t in first.inputs] == first_data
    # each request has its own dicts: what is added to one (forwarded headers) is not in the next
    second.parameters["forwarded"] = "x"
    second.outputs[0].parameters["binary_data"] = False
    third, _ = parse(cache, body(head, *first_data), head)
    assert third.parameters == {"priority": 2} and third.outputs[0].parameters == {"binary_data": True}


@pytest.mark.parametrize("binary", [b"\x00" * 60, b"\x00" * 71, b"", b"\x00" * 65],
                         ids=["short", "long-2", "none", "long"])
def test_kept_header_with_a_body_of_other_sizes_is_refused_as_without_the_cache(binary):
    head = header(sizes=(64, 4))
    cache = HeaderCache()
    parse(cache, body(head, b"\x00" * 68), head)  # kept
    assert len(cache) == 1
    with pytest.raises(ServerError) as cached:
        parse(cache, body(head, binary), head)
    with pytest.raises(ServerError) as plain:
        parse_infer_request("m", "", body(head, binary), len(head), None)
    assert (cached.value.status, cached.value.message) == (plain.value.status, plain.value.message)
    assert "for model 'm'" in cached.value.message


def test_headers_that_are_not_kept():
    cache = HeaderCache()
    json_data = orjson.dumps({"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [1]}]})
    shm = orjson.dumps({"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "parameters": {
        "shared_memory_region": "r", "shared_memory_byte_size": 4}}]})
    classify = header(outputs=({"name": "OUT", "parameters": {"classification": 2}},))
    out_shm = header(outputs=({"name": "OUT", "parameters": {"shared_memory_region": "r",
                                                             "shared_memory_byte_size": 4}},))
    for head, tail in ((json_data, b""), (shm, b""), (classify, b"\x00" * 64), (out_shm, b"\x00" * 64)):
        request, _ = parse(cache, head + tail, head)
        assert request.layout is None
    request, _ = cache.parse("m", "", json_data, None, None)  # a JSON-only body
    assert request.layout is None and len(cache) == 0


def test_a_bad_header_is_not_kept_and_fails_each_time():
    cache = HeaderCache()
    head = orjson.dumps({"inputs": [{"name": "IN", "datatype": "FP32", "shape": [-1], "parameters": {
        "binary_data_size": 4}}]})
    for _ in range(2):
        with pytest.raises(ServerError, match="dimension -1 is negative"):
            parse(cache, head + b"\x00" * 4, head)
    assert len(cache) == 0


def test_the_cache_is_bounded():
    cache = HeaderCache(max_entries=4)
    for i in range(11):
        head = header(request_id=f"id{i}")
        request, _ = parse(cache, body(head, b"\x00" * 64), head)
        assert request.id == f"id{i}" and request.layout is not None
        assert len(cache) <= 4
    head = header(sizes=(4,), request_id="x" * 5000)  # longer than a kept header may be: parsed each time
    request, _ = parse(cache, body(head, b"\x00" * 4), head)
    assert request.layout is None and request.id == "x" * 5000
