"""ModelInfer requests whose only request parameters are sequence parameters (sequence_id, sequence_start,
sequence_end) still get their header's template: the scan reads those parameters itself; the conversion is the same
InferRequest as protobuf's, and any other parameter, kind or malformed entry gets protobuf's parse and its errors."""

from __future__ import annotations

import pytest

from pytriton.exceptions import ServerError
from pytriton.frontend.grpc import wire as _wire
from pytriton.frontend.grpc._convert import to_infer_request
from pytriton.frontend.grpc.wire import parse_infer_request

pb = pytest.importorskip("tritonclient.grpc").service_pb2


def _request(params: dict, rid: str = "") -> bytes:
    message = pb.ModelInferRequest(model_name="acc", id=rid)
    message.inputs.add(name="INPUT", datatype="FP32").shape.extend((1, 4))
    message.outputs.add(name="OUTPUT")
    for key, (kind, value) in params.items():
        setattr(message.parameters[key], kind, value)
    message.raw_input_contents.append(bytes(16))
    return message.SerializeToString()


def _full(data: bytes):
    """The conversion straight from protobuf's parse (no template, no scan)."""
    message = pb.ModelInferRequest.FromString(data)
    return to_infer_request(_wire.InferRequestView(message, [memoryview(r) for r in message.raw_input_contents]))


SEQUENCE = [
    {"sequence_id": ("int64_param", 17), "sequence_start": ("bool_param", True)},
    {"sequence_id": ("int64_param", 17), "sequence_start": ("bool_param", False), "sequence_end": ("bool_param", False)},
    {"sequence_id": ("int64_param", 2**63 - 1), "sequence_end": ("bool_param", True)},
    {"sequence_id": ("int64_param", -5)},
    {"sequence_id": ("int64_param", 0)},
    {"sequence_id": ("string_param", "seq-é")},
    {"sequence_id": ("string_param", "")},
    {"sequence_id": ("string_param", "x" * 300), "sequence_start": ("bool_param", True)},  # (too long to cache)
    {"sequence_start": ("bool_param", True)},
]


@pytest.mark.parametrize("params", SEQUENCE)
def test_sequence_parameters_keep_the_template(params):
    _wire.TEMPLATES.clear()
    to_infer_request(parse_infer_request(_request({})))  # the template of the header without parameters
    data = _request(params)
    for _ in range(2):  # (read, then from the cache of entries)
        view = parse_infer_request(data)
        assert view.template is not None
        converted = to_infer_request(view)
        assert converted == _full(data)
        assert converted.parameters == {key: value for key, (_, value) in params.items()}
        assert view.id == "" and view.parameters[next(iter(params))]  # (the header still reads in full)


@pytest.mark.parametrize("params", SEQUENCE[:3])
def test_a_sequence_request_first_seen_leaves_a_template(params):
    _wire.TEMPLATES.clear()
    data = _request(params)
    first = parse_infer_request(data)
    assert first.template is None
    assert to_infer_request(first) == _full(data)
    second = parse_infer_request(_request({"sequence_id": ("int64_param", 99)}))
    assert second.template is not None
    assert to_infer_request(second).parameters == {"sequence_id": 99}
    assert to_infer_request(parse_infer_request(_request({}))).parameters == {}


@pytest.mark.parametrize("params", [
    {"sequence_id": ("int64_param", 3), "priority": ("uint64_param", 1)},
    {"sequence_id": ("int64_param", 3), "custom": ("string_param", "v")},
])
def test_other_parameters_take_the_full_path(params):
    _wire.TEMPLATES.clear()
    to_infer_request(parse_infer_request(_request({})))
    data = _request(params)
    view = parse_infer_request(data)
    assert view.template is None and view.sequence_parameters is None
    assert to_infer_request(view) == _full(data)


@pytest.mark.parametrize(("params", "message"), [
    ({"sequence_id": ("uint64_param", 3)}, "invalid value type for 'sequence_id' parameter"),
    ({"sequence_id": ("double_param", 3.0)}, "invalid value type for 'sequence_id' parameter"),
    ({"sequence_start": ("int64_param", 1)}, "invalid value type for 'sequence_start' parameter"),
    ({"sequence_end": ("string_param", "yes")}, "invalid value type for 'sequence_end' parameter"),
])
def test_wrong_kinds_get_the_full_error(params, message):
    _wire.TEMPLATES.clear()
    to_infer_request(parse_infer_request(_request({})))
    data = _request(params)
    view = parse_infer_request(data)
    assert view.template is None
    with pytest.raises(ServerError) as caught:
        to_infer_request(view)
    with pytest.raises(ServerError) as expected:
        _full(data)
    assert caught.value.message == expected.value.message and message in caught.value.message


def test_odd_entries_go_to_protobuf():
    _wire.TEMPLATES.clear()
    to_infer_request(parse_infer_request(_request({})))
    base = _request({"sequence_id": ("int64_param", 5)})
    entry = pb.ModelInferRequest()
    entry.parameters["sequence_id"].int64_param = 6
    field = entry.SerializeToString()  # tag 0x22, length, the map entry
    # the same key twice (protobuf keeps the last), and a value whose oneof is set twice (the last wins)
    twice = base + field
    payload = bytes.fromhex("0a0b") + b"sequence_id" + bytes.fromhex("1204") + bytes.fromhex("1001") + bytes.fromhex("1007")
    oneof_twice = base + bytes([0x22, len(payload)]) + payload
    for data in (twice, oneof_twice):
        view = parse_infer_request(data)
        assert to_infer_request(view) == _full(data)
    assert to_infer_request(parse_infer_request(twice)).parameters == {"sequence_id": 6}
    assert to_infer_request(parse_infer_request(oneof_twice)).parameters == {"sequence_id": 7}


def test_the_entry_cache_is_bounded():
    _wire.TEMPLATES.clear()
    for index in range(_wire._ENTRIES_MAX + 3):
        to_infer_request(parse_infer_request(_request({"sequence_id": ("int64_param", index + 1)})))
    assert 0 < len(_wire._ENTRIES) <= _wire._ENTRIES_MAX


def test_entries_between_other_fields_still_find_the_template():
    _wire.TEMPLATES.clear()
    to_infer_request(parse_infer_request(_request({})))
    head = pb.ModelInferRequest(model_name="acc")
    head.inputs.add(name="INPUT", datatype="FP32").shape.extend((1, 4))
    outputs = pb.ModelInferRequest()
    outputs.outputs.add(name="OUTPUT")
    first, second = pb.ModelInferRequest(), pb.ModelInferRequest()
    first.parameters["sequence_id"].int64_param = 8
    second.parameters["sequence_end"].bool_param = True
    raw = pb.ModelInferRequest(raw_input_contents=[bytes(16)])
    data = b"".join(m.SerializeToString() for m in (head, first, outputs, second, raw))
    view = parse_infer_request(data)
    assert view.template is not None
    assert to_infer_request(view) == _full(data)
    assert to_infer_request(view).parameters == {"sequence_id": 8, "sequence_end": True}


def test_ids_are_read_by_the_scan_and_kept_out_of_the_template():
    """perf_analyzer numbers the requests of its sequences: each has its own id and sequence parameters."""
    _wire.TEMPLATES.clear()
    first = _request({"sequence_id": ("int64_param", 1), "sequence_start": ("bool_param", True)}, rid="0")
    assert to_infer_request(parse_infer_request(first)) == _full(first)
    for rid, cid in (("1", 2), ("0", 1), ("req-é", 3), ("", 4)):
        data = _request({"sequence_id": ("int64_param", cid), "sequence_end": ("bool_param", False)}, rid=rid)
        view = parse_infer_request(data)
        assert view.template is not None
        assert view.id == rid and view._header is None  # (the id without protobuf's parse)
        converted = to_infer_request(view)
        assert converted == _full(data) and converted.id == rid
    plain = _request({}, rid="7")
    assert to_infer_request(parse_infer_request(plain)) == _full(plain)
    assert parse_infer_request(plain).template is not None


def test_an_id_that_is_not_text_gets_protobufs_error():
    _wire.TEMPLATES.clear()
    to_infer_request(parse_infer_request(_request({})))
    good = _request({}, rid="ab")
    bad = good.replace(b"\x1a\x02ab", b"\x1a\x02\xff\xfe")
    assert bad != good
    with pytest.raises(Exception) as expected:
        pb.ModelInferRequest.FromString(bad)
    with pytest.raises(type(expected.value)):
        parse_infer_request(bad)
