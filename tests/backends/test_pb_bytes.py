"""pb_utils' byte-tensor and datatype helpers, as a Python-backend model imports them."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from tritonclient.utils import deserialize_bytes_tensor as client_deserialize
from tritonclient.utils import serialize_byte_tensor as client_serialize

from pytriton.backends import pb_utils


def test_serialize_is_length_prefixed_in_c_order():
    tensor = np.array([[b"ab", b""], [b"\x00z\x00", "h\u00e9"]], dtype=np.object_)
    data = pb_utils.serialize_byte_tensor(tensor)
    assert data == (struct.pack("<I", 2) + b"ab" + struct.pack("<I", 0) + struct.pack("<I", 3) + b"\x00z\x00"
                    + struct.pack("<I", 3) + "h\u00e9".encode())
    assert data == client_serialize(tensor).item()  # what tritonclient sends for the same tensor


def test_serialize_other_objects_as_their_str_and_bytes_dtype():
    objects = np.array([7, 1.5], dtype=np.object_)
    assert pb_utils.serialize_byte_tensor(objects) == b"\x01\x00\x00\x007\x03\x00\x00\x001.5"
    assert pb_utils.serialize_byte_tensor(np.array([b"xy", b"z"])) == b"\x02\x00\x00\x00xy\x01\x00\x00\x00z"
    assert pb_utils.serialize_byte_tensor(np.array([], dtype=np.object_)) == b""
    assert pb_utils.serialize_byte_tensor(np.array([1, 2], dtype=np.int32)) is None


def test_deserialize_round_trip_and_client_data():
    tensor = np.array([b"one", b"", b"\xff\x00"], dtype=np.object_)
    back = pb_utils.deserialize_bytes_tensor(pb_utils.serialize_byte_tensor(tensor))
    assert back.dtype == np.object_ and back.tolist() == [b"one", b"", b"\xff\x00"]
    from_client = pb_utils.deserialize_bytes_tensor(client_serialize(tensor).item())
    assert from_client.tolist() == tensor.tolist()
    assert client_deserialize(pb_utils.serialize_byte_tensor(tensor)).tolist() == tensor.tolist()
    assert pb_utils.deserialize_bytes_tensor(b"").shape == (0,)


def test_deserialize_names_a_truncated_buffer():
    with pytest.raises(ValueError, match="cut short: an element of 5 bytes"):
        pb_utils.deserialize_bytes_tensor(struct.pack("<I", 5) + b"abc")
    with pytest.raises(ValueError, match="4-byte length"):
        pb_utils.deserialize_bytes_tensor(b"\x01\x00")


@pytest.mark.parametrize("number, numpy_type", [
    (1, np.bool_), (2, np.uint8), (3, np.uint16), (4, np.uint32), (5, np.uint64), (6, np.int8), (7, np.int16),
    (8, np.int32), (9, np.int64), (10, np.float16), (11, np.float32), (12, np.float64), (13, np.object_)])
def test_datatype_numbers_both_ways(number, numpy_type):
    assert pb_utils.triton_to_numpy_type(number) is numpy_type
    assert pb_utils.numpy_to_triton_type(numpy_type) == number
    assert pb_utils.numpy_to_triton_type(np.dtype(numpy_type)) == number


def test_datatype_numbers_outside_the_table():
    assert pb_utils.numpy_to_triton_type(np.bytes_) == 13
    assert pb_utils.triton_to_numpy_type(0) is None  # TYPE_INVALID
    assert pb_utils.triton_to_numpy_type(14) is None  # BF16: no numpy type
    assert pb_utils.numpy_to_triton_type(np.complex64) is None
    assert pb_utils.numpy_to_triton_type("not a type") is None
