"""BYTES tensors: Triton's serialized form (uint32 length + bytes per element), conversions and errors."""

from __future__ import annotations

import numpy
import pytest

from pytriton.tritonserver._enums import DataType, MemoryType
from pytriton.tritonserver._errors import InvalidArgumentError
from pytriton.tritonserver._memory import MemoryBuffer
from pytriton.tritonserver._tensor import Tensor


def _raw(tensor: Tensor) -> bytes:
    return bytes(tensor.memory_buffer._raw().host_array())


def test_seed_examples():
    for tensor in (
        Tensor.from_bytes_array(numpy.array(["hello"])),
        Tensor.from_bytes_array(["hello"]),
        Tensor.from_string_array(numpy.array(["hello"])),
        Tensor.from_string_array(["hello"]),
    ):
        assert (tensor.data_type, list(tensor.shape), tensor.size) == (DataType.BYTES, [1], 9)
        assert tensor.to_bytes_array().tolist() == [b"hello"]
        assert tensor.to_string_array().tolist() == ["hello"]


def test_serialized_form_is_tritons():
    tensor = Tensor.from_bytes_array([[b"ab", b""], [b"\x00\xff", b"xyz"]])
    assert list(tensor.shape) == [2, 2]
    assert _raw(tensor) == (
        b"\x02\x00\x00\x00ab" + b"\x00\x00\x00\x00" + b"\x02\x00\x00\x00\x00\xff" + b"\x03\x00\x00\x00xyz"
    )
    assert tensor.memory_type == MemoryType.CPU and tensor.size == 4 * 4 + 7


@pytest.mark.parametrize(
    "values",
    [
        numpy.array([b"a", b"bc"], dtype=numpy.bytes_),
        numpy.array(["a", "bc"], dtype=numpy.str_),
        numpy.array([b"a", "bc"], dtype=numpy.object_),
        [b"a", b"bc"],
        ["a", "bc"],
    ],
)
def test_bytes_str_and_object_arrays_round_trip(values):
    tensor = Tensor.from_bytes_array(values)
    result = tensor.to_bytes_array()
    assert result.dtype == numpy.object_
    assert result.tolist() == [b"a", b"bc"]
    assert tensor.to_string_array().tolist() == ["a", "bc"]


def test_unicode_is_utf8_and_comes_back_as_str():
    tensor = Tensor.from_string_array([["wörld", "日本"], ["", "ok"]])
    assert tensor.to_bytes_array().tolist() == [["wörld".encode(), "日本".encode()], [b"", b"ok"]]
    strings = tensor.to_string_array()
    assert strings.dtype.kind == "U" and strings.shape == (2, 2)
    assert strings.tolist() == [["wörld", "日本"], ["", "ok"]]


def test_other_objects_are_serialized_as_their_str():
    tensor = Tensor.from_bytes_array(numpy.array([1, 2.5, None], dtype=numpy.object_))
    assert tensor.to_bytes_array().tolist() == [b"1", b"2.5", b"None"]


def test_empty_bytes_tensor():
    tensor = Tensor.from_bytes_array(numpy.array([], dtype=numpy.object_).reshape(0, 3))
    assert list(tensor.shape) == [0, 3] and tensor.size == 0
    assert tensor.to_bytes_array().shape == (0, 3)


def test_bytes_through_from_object():
    tensor = Tensor._from_object(["hello", "world"])
    assert tensor.data_type == DataType.BYTES
    assert tensor._to_numpy().tolist() == [b"hello", b"world"]


def test_bytes_in_a_buffer_from_elsewhere():
    serialized = numpy.frombuffer(b"\x05\x00\x00\x00hello\x01\x00\x00\x00!", dtype=numpy.uint8)
    tensor = Tensor(DataType.BYTES, [2], MemoryBuffer.from_dlpack(serialized))
    assert tensor.to_bytes_array().tolist() == [b"hello", b"!"]


def test_from_bytes_array_refuses_numbers():
    with pytest.raises(InvalidArgumentError, match="Unsupported conversion from .* to Triton BYTES Tensor"):
        Tensor.from_bytes_array(numpy.array([1, 2], dtype=numpy.int32))
    with pytest.raises(InvalidArgumentError):
        Tensor.from_string_array([1.0])


def test_to_bytes_array_refuses_other_types():
    message = "Tensor has data type TRITONSERVER_DataType.FP32 not TRITONSERVER_DataType.BYTES"
    with pytest.raises(InvalidArgumentError, match=message):
        Tensor.from_dlpack(numpy.zeros(2, numpy.float32)).to_bytes_array()


@pytest.mark.parametrize(
    ("data", "shape", "message"),
    [
        (b"\x05\x00\x00\x00hel", [1], "runs past the data"),
        (b"\x01\x00\x00\x00a\x02\x00", [2], "truncated"),
        (b"\x01\x00\x00\x00a", [2], "holds 1 elements, expected 2"),
    ],
)
def test_malformed_bytes_data_is_an_invalid_argument(data, shape, message):
    tensor = Tensor(DataType.BYTES, shape, MemoryBuffer.from_dlpack(numpy.frombuffer(data, dtype=numpy.uint8)))
    with pytest.raises(InvalidArgumentError, match=message):
        tensor.to_bytes_array()


def test_non_utf8_bytes_are_refused_by_to_string_array_only():
    tensor = Tensor.from_bytes_array([b"\xff\xfe"])
    assert tensor.to_bytes_array().tolist() == [b"\xff\xfe"]
    with pytest.raises(InvalidArgumentError, match="not UTF-8"):
        tensor.to_string_array()


def test_bytes_tensors_have_no_dlpack_form():
    with pytest.raises(InvalidArgumentError, match="Can't convert TRITONSERVER_DataType.BYTES to DLPack data type"):
        numpy.from_dlpack(Tensor.from_string_array(["a"]))
