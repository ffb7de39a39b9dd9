"""ModelInfer requests that repeat a plain header are converted from a template: the same InferRequest as the full
conversion, and the same errors."""

from __future__ import annotations

import pytest

from pytriton.exceptions import ServerError
from pytriton.frontend.grpc import wire as _wire
from pytriton.frontend.grpc._convert import to_infer_request
from pytriton.frontend.grpc.wire import parse_infer_request

pb = pytest.importorskip("tritonclient.grpc").service_pb2


def _request(rid: str = "", raw: int = 2, params: bool = False, shm: bool = False, outputs: tuple = ("Y",),
             shape: tuple = (1, 4)) -> bytes:  # fmt: skip
    message = pb.ModelInferRequest(model_name="m", model_version="2", id=rid)
    for name in ("A", "B"):
        tensor = message.inputs.add(name=name, datatype="FP32")
        tensor.shape.extend(shape)
        if shm and name == "B":
            tensor.parameters["shared_memory_region"].string_param = "r"
            tensor.parameters["shared_memory_byte_size"].int64_param = 16
    for name in outputs:
        message.outputs.add(name=name)
    if params:
        message.parameters["priority"].uint64_param = 1
    for index in range(raw):
        message.raw_input_contents.append(bytes([index]) * 16)
    return message.SerializeToString()


def _full(data: bytes):
    """The conversion straight from protobuf's parse (no template)."""
    message = pb.ModelInferRequest.FromString(data)
    return to_infer_request(_wire.InferRequestView(message, [memoryview(r) for r in message.raw_input_contents]))


@pytest.mark.parametrize("kwargs", [{}, {"outputs": ()}, {"shape": (3, 4)}, {"rid": "id-1"}, {"params": True},
                                    {"shm": True, "raw": 1}])
def test_template_conversion_equals_the_full_one(kwargs):
    _wire.TEMPLATES.clear()
    data = _request(**kwargs)
    first = parse_infer_request(data)
    assert first.template is None
    converted = [to_infer_request(first)]
    second = parse_infer_request(data)
    plain = not (kwargs.get("params") or kwargs.get("shm"))  # (an id is read by the scan, not kept in the template)
    assert (second.template is not None) == plain  # only plain headers get a template
    converted.append(to_infer_request(second))
    for request in converted:
        assert request == _full(data)
    assert second.model_name == "m" and second.model_version == "2" and second.id == kwargs.get("rid", "")
    assert converted[0].outputs is not converted[1].outputs  # (each request its own mutable parts)


def test_missing_raw_input_has_the_full_error():
    _wire.TEMPLATES.clear()
    to_infer_request(parse_infer_request(_request()))  # the template of this header
    short = _request(raw=1)
    view = parse_infer_request(short)
    assert view.template is not None
    with pytest.raises(ServerError) as caught:
        to_infer_request(view)
    with pytest.raises(ServerError) as expected:
        _full(short)
    assert caught.value.message == expected.value.message
    assert "unable to find data for input tensor 'B'" in caught.value.message


def test_templates_are_bounded():
    _wire.TEMPLATES.clear()
    for index in range(_wire.TEMPLATES_MAX + 3):
        message = pb.ModelInferRequest(model_name=f"m{index}")
        message.inputs.add(name="A", datatype="FP32").shape.append(1)
        message.raw_input_contents.append(bytes(4))
        to_infer_request(parse_infer_request(message.SerializeToString()))
    assert 0 < len(_wire.TEMPLATES) <= _wire.TEMPLATES_MAX


def test_long_headers_get_no_template():
    """The cache holds short headers only (a client cannot make it keep megabytes of header bytes)."""
    _wire.TEMPLATES.clear()
    message = pb.ModelInferRequest(model_name="m" * (_wire.TEMPLATE_HEAD_MAX + 1))
    message.inputs.add(name="A", datatype="FP32").shape.append(1)
    message.raw_input_contents.append(bytes(4))
    data = message.SerializeToString()
    for _ in range(2):
        view = parse_infer_request(data)
        assert view.template is None and to_infer_request(view) == _full(data)
    assert not _wire.TEMPLATES


def test_a_message_after_the_last_plain_header_is_read_without_the_scan():
    """A message that is the last plain header followed by raw_input_contents only is read from that header's
    template directly; anything else after the header bytes (another field, a truncated tensor) is scanned."""
    _wire.TEMPLATES.clear()
    _wire._last_plain = None
    data = _request()
    to_infer_request(parse_infer_request(data))  # the template of this header
    assert parse_infer_request(data).template is not None and _wire._last_plain is not None
    assert _wire._after_last_plain(data) is not None  # (the shortcut reads it)
    bigger = _request(shape=(1, 4), raw=1) + bytes([(7 << 3) | 2, 200, 1]) + bytes(200)  # a 2-byte length varint
    request = parse_infer_request(bigger)
    assert [len(part) for part in request.raw_input_contents] == [16, 200]
    assert to_infer_request(request) == _full(bigger)
    odd = [data + pb.ModelInferRequest(id="late").SerializeToString(),  # a header field after the tensors
           data[:-3],  # the last tensor cut short
           data + bytes([(7 << 3) | 2, 0x80])]  # a length varint cut short
    for message in odd:
        assert _wire._after_last_plain(message) is None
    assert parse_infer_request(odd[0]).id == "late"
    with pytest.raises(Exception, match="[Ee]rror parsing message"):
        parse_infer_request(odd[1])  # (protobuf's own parse rejects it, as before)
    assert to_infer_request(parse_infer_request(_request(raw=3))) == _full(_request(raw=3))
