"""The shortcut after a scanned sequence request (`_wire._after_last_scanned`): a client that numbers the requests of
its sequences repeats the header around a block of id and sequence parameter fields; the next such message is read
without the scan, and converts to what protobuf's parse gives. Anything else (another parameter, kind, field, header or
an id that is not text) is left to the scan and the full path."""

from __future__ import annotations

import pytest

from pytriton.frontend.grpc import wire as _wire
from pytriton.frontend.grpc._convert import to_infer_request
from pytriton.frontend.grpc.wire import parse_infer_request

pb = pytest.importorskip("tritonclient.grpc").service_pb2


def _request(params: dict, rid: str = "", model: str = "acc", output: str = "OUTPUT", raws: int = 1) -> bytes:
    message = pb.ModelInferRequest(model_name=model, id=rid)
    for index in range(raws):
        message.inputs.add(name=f"INPUT{index}" if index else "INPUT", datatype="FP32").shape.extend((1, 4))
    message.outputs.add(name=output)
    for key, (kind, value) in params.items():
        setattr(message.parameters[key], kind, value)
    for index in range(raws):
        message.raw_input_contents.append(bytes([index]) * 16)
    return message.SerializeToString()


def _full(data: bytes):
    message = pb.ModelInferRequest.FromString(data)
    return to_infer_request(_wire.InferRequestView(message, [memoryview(r) for r in message.raw_input_contents]))


def _seq(cid, rid="0", start=False, end=False, **kwargs) -> bytes:
    params = {"sequence_id": ("string_param" if isinstance(cid, str) else "int64_param", cid),
              "sequence_start": ("bool_param", start), "sequence_end": ("bool_param", end)}
    return _request(params, rid=rid, **kwargs)


@pytest.fixture
def primed():
    """Templates and the shortcut set by a first sequence request (the scan reads it)."""
    _wire.TEMPLATES.clear()
    _wire._last_scanned = None
    first = _seq(1, start=True)
    view = parse_infer_request(first)
    assert view.template is None
    to_infer_request(view)  # (leaves the template)
    assert parse_infer_request(first).template is not None and _wire._last_scanned is not None


@pytest.mark.parametrize(("cid", "rid", "start", "end"), [
    (2, "1", False, False), (3, "7", True, False), (2**63 - 1, "", False, True), (-4, "req-é", True, True),
    ("seq-é", "2", False, False), ("", "3", True, False), (5, "x" * 300, False, False),
])
def test_the_next_sequence_request_skips_the_scan(primed, cid, rid, start, end):
    data = _seq(cid, rid, start, end)
    for _ in range(2):  # (read, then with its entries from the cache of entries)
        view = _wire._after_last_scanned(data)
        assert view is not None and view.template is not None and view._header is None
        assert parse_infer_request(data).template is not None
        converted = to_infer_request(view)
        assert converted == _full(data)
        assert converted.id == rid
        assert converted.parameters == {"sequence_id": cid, "sequence_start": start, "sequence_end": end}
        assert view.header.id == rid and bytes(view.raw_input_contents[0]) == bytes(16)  # (the header reads in full)


def test_several_inputs_and_only_some_parameters(primed):
    data = _request({"sequence_id": ("int64_param", 9)}, rid="4")
    view = _wire._after_last_scanned(data)
    assert view is not None and to_infer_request(view) == _full(data)
    assert to_infer_request(view).parameters == {"sequence_id": 9}
    two = _seq(9, raws=2)  # another header (two inputs): the scan, which then keeps that one
    assert _wire._after_last_scanned(two) is None
    assert to_infer_request(parse_infer_request(two)) == _full(two)


def test_parameters_handed_out_are_the_requests_own(primed):
    data = _seq(6, "1")
    first = to_infer_request(parse_infer_request(data))
    first.parameters["sequence_id"] = 99
    first.parameters["added"] = 1
    assert to_infer_request(parse_infer_request(data)).parameters == {
        "sequence_id": 6, "sequence_start": False, "sequence_end": False}


@pytest.mark.parametrize("params", [
    {"sequence_id": ("int64_param", 3), "priority": ("uint64_param", 1)},
    {"sequence_id": ("uint64_param", 3)},
    {"sequence_start": ("int64_param", 1)},
    {"sequence_id": ("int64_param", 3), "custom": ("string_param", "v")},
])
def test_other_parameters_and_kinds_take_the_full_path(primed, params):
    data = _request(params, rid="1")
    assert _wire._after_last_scanned(data) is None
    view = parse_infer_request(data)
    assert view.template is None
    try:
        expected = _full(data)
    except Exception as error:  # (a wrong kind: the same error either way)
        with pytest.raises(type(error)) as caught:
            to_infer_request(view)
        assert str(caught.value) == str(error)
    else:
        assert to_infer_request(view) == expected


def test_an_id_that_is_not_text_is_left_to_protobuf(primed):
    good = _seq(2, "ab")
    bad = good.replace(b"\x1a\x02ab", b"\x1a\x02\xff\xfe")
    assert bad != good
    assert _wire._after_last_scanned(bad) is None
    with pytest.raises(Exception) as expected:
        pb.ModelInferRequest.FromString(bad)
    with pytest.raises(type(expected.value)):
        parse_infer_request(bad)


def test_another_header_or_fields_after_the_tensors_are_scanned(primed):
    only_id = _request({}, rid="1")  # (an id alone is such a block)
    assert to_infer_request(_wire._after_last_scanned(only_id)) == _full(only_id)
    for data in (_seq(2, model="other"), _seq(2, output="OTHER")):
        assert _wire._after_last_scanned(data) is None
        assert to_infer_request(parse_infer_request(data)) == _full(data)
    _wire._last_scanned = None
    to_infer_request(parse_infer_request(_seq(1)))
    extra = pb.ModelInferRequest()
    extra.parameters["sequence_end"].bool_param = True
    after = _seq(2, "1") + extra.SerializeToString()  # a parameter after raw_input_contents (protobuf merges it)
    assert _wire._after_last_scanned(after) is None
    converted = to_infer_request(parse_infer_request(after))
    assert converted == _full(after) and converted.parameters["sequence_end"] is True


def test_a_forgotten_template_is_not_used(primed):
    data = _seq(3, "2")
    _wire.TEMPLATES.clear()
    assert _wire._after_last_scanned(data) is None
    assert to_infer_request(parse_infer_request(data)) == _full(data)


def test_cut_messages_never_break_the_shortcut(primed):
    data = _seq(12, "5", True, False)
    for size in range(len(data)):
        cut = data[:size]
        view = _wire._after_last_scanned(cut)  # (None, or a message protobuf reads the same)
        if view is not None:
            assert to_infer_request(view) == _full(cut)


def test_entries_in_any_order(primed):
    """perf_analyzer writes the map's entries in no fixed order, and a new sequence id for each sequence."""
    orders = [("sequence_id", "sequence_start", "sequence_end"), ("sequence_end", "sequence_id", "sequence_start"),
              ("sequence_start", "sequence_end", "sequence_id")]
    values = {"sequence_id": ("int64_param", 0), "sequence_start": ("bool_param", True),
              "sequence_end": ("bool_param", False)}
    for index in range(30):
        params = {key: values[key] if key != "sequence_id" else ("int64_param", 1000 + index)
                  for key in orders[index % 3]}
        data = _request(params, rid="0")
        view = _wire._after_last_scanned(data)
        assert view is not None and to_infer_request(view) == _full(data)
        assert to_infer_request(view).parameters["sequence_id"] == 1000 + index


def test_a_flood_of_id_fields_is_left_to_protobuf(primed):
    """Thousands of empty id fields between the header's parts: the shortcut stops counting as the scan does."""
    data = _seq(2, "1")
    prefix = _wire._last_scanned[0]
    flood = prefix + b"\x1a\x00" * (_wire._MAX_TOP_FIELDS + 5) + data[len(prefix):]
    assert _wire._after_last_scanned(flood) is None
    assert to_infer_request(parse_infer_request(flood)) == _full(flood)
