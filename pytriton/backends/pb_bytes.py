"""The byte-tensor and datatype helpers of `triton_python_backend_utils` (re-exported by `pb_utils`), as Triton's
python_backend defines them: BYTES tensors as a flat run of (4-byte little-endian length, bytes) elements in C order,
and datatypes as the numbers of Triton's TRITONSERVER_DataType enum (1 BOOL ... 13 BYTES)."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

_TRITON_TO_NUMPY: dict[int, Any] = {
    1: np.bool_, 2: np.uint8, 3: np.uint16, 4: np.uint32, 5: np.uint64, 6: np.int8, 7: np.int16, 8: np.int32,
    9: np.int64, 10: np.float16, 11: np.float32, 12: np.float64, 13: np.object_,
}
_NUMPY_TO_TRITON: dict[Any, int] = {np.dtype(t): n for n, t in _TRITON_TO_NUMPY.items()}
_LENGTH = struct.Struct("<I")


def serialize_byte_tensor(input_tensor: np.ndarray) -> bytes | None:
    """The elements of a tensor of bytes (dtype object or bytes_) each as its 4-byte little-endian length and its
    bytes, in C order; an object that is not bytes goes as the UTF-8 of its str(). None for any other dtype.

    (Triton returns an empty tuple for an empty tensor; here it is empty bytes, what the other tensors' type is.)"""
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type != np.bytes_:
        return None
    parts = []
    for item in input_tensor.reshape(-1, order="C").tolist():
        data = item if isinstance(item, bytes) else str(item).encode("utf-8")
        parts.append(_LENGTH.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray:
    """The elements of a serialized BYTES tensor as a 1-D numpy array of bytes objects (dtype object)."""
    view = memoryview(encoded_tensor).cast("B")
    items: list[bytes] = []
    offset = 0
    while offset < len(view):
        if offset + _LENGTH.size > len(view):
            raise ValueError(f"serialized BYTES tensor is cut short: {len(view) - offset} bytes left at offset "
                             f"{offset}, where an element's 4-byte length should be")
        (length,) = _LENGTH.unpack_from(view, offset)
        offset += _LENGTH.size
        if offset + length > len(view):
            raise ValueError(f"serialized BYTES tensor is cut short: an element of {length} bytes at offset {offset}, "
                             f"but only {len(view) - offset} bytes are left")
        items.append(bytes(view[offset:offset + length]))
        offset += length
    array = np.empty(len(items), dtype=np.object_)
    array[:] = items
    return array


def triton_to_numpy_type(data_type: int) -> Any:
    """The numpy type of a TRITONSERVER_DataType number (13, BYTES: np.object_); None for another number."""
    return _TRITON_TO_NUMPY.get(data_type)


def numpy_to_triton_type(data_type: Any) -> int | None:
    """The TRITONSERVER_DataType number of a numpy type or dtype (np.object_ and np.bytes_: 13, BYTES); None for
    another."""
    try:
        dtype = np.dtype(data_type)
    except TypeError:
        return None
    if dtype.kind == "S":
        return 13
    return _NUMPY_TO_TRITON.get(dtype)
