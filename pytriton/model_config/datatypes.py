"""Triton datatypes: names on the wire, in model configs and in numpy, and the BYTES encoding.

BYTES tensors travel as back-to-back elements, each a 4-byte little-endian length and the bytes;
the callable sees them as numpy arrays of `object` holding `bytes`.
"""

from __future__ import annotations

import struct
from typing import Any

import ml_dtypes
import numpy as np

_LEN = struct.Struct("<I")

# Wire datatype -> numpy dtype. BYTES maps to object arrays.
TRITON_TO_NUMPY: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "BYTES": np.dtype(np.object_),
}
NUMPY_TO_TRITON: dict[np.dtype, str] = {v: k for k, v in TRITON_TO_NUMPY.items()}

# Wire datatype <-> model-config enum name (model_config.proto DataType).
TRITON_TO_CONFIG: dict[str, str] = {k: "TYPE_" + (k if k != "BYTES" else "STRING") for k in TRITON_TO_NUMPY}
CONFIG_TO_TRITON: dict[str, str] = {v: k for k, v in TRITON_TO_CONFIG.items()}

# Stable small integers for the internal worker protocol.
TRITON_TO_CODE: dict[str, int] = {name: i + 1 for i, name in enumerate(TRITON_TO_NUMPY)}
CODE_TO_TRITON: dict[int, str] = {v: k for k, v in TRITON_TO_CODE.items()}
CODE_TO_NUMPY: dict[int, np.dtype] = {TRITON_TO_CODE[k]: v for k, v in TRITON_TO_NUMPY.items()}

ITEMSIZE: dict[str, int] = {k: v.itemsize for k, v in TRITON_TO_NUMPY.items() if k != "BYTES"}

_ALIASES = {
    "bytes": "BYTES",
    "string": "BYTES",
    "str": "BYTES",
    "object": "BYTES",
    "bool": "BOOL",
    "bfloat16": "BF16",
    "float16": "FP16",
    "half": "FP16",
    "float32": "FP32",
    "float": "FP32",
    "float64": "FP64",
    "double": "FP64",
}


def parse_datatype(text: str) -> str:
    """Return the Triton datatype for a name given as a Triton name, a config name or a numpy name."""
    name = text.strip()
    upper = name.upper()
    if upper in TRITON_TO_NUMPY:
        return upper
    if upper in CONFIG_TO_TRITON:
        return CONFIG_TO_TRITON[upper]
    lower = name.lower()
    if lower in _ALIASES:
        return _ALIASES[lower]
    try:
        return numpy_to_triton(np.dtype(lower))
    except TypeError:
        pass
    raise ValueError(f"unknown datatype '{text}'; use a Triton name (e.g. INT32, FP32, BYTES) or a numpy name")


def numpy_to_triton(dtype: Any) -> str:
    """Return the Triton datatype of a numpy dtype (bytes/str/object dtypes are BYTES)."""
    dt = np.dtype(dtype)
    if dt.kind in ("S", "U", "O"):
        return "BYTES"
    try:
        return NUMPY_TO_TRITON[dt]
    except KeyError:
        raise TypeError(f"numpy dtype {dt} has no Triton datatype") from None


def serialize_bytes_tensor(array: np.ndarray) -> bytes:
    """Encode an array of bytes/str/objects as Triton BYTES (row-major, length-prefixed elements)."""
    parts: list[bytes] = []
    append = parts.append
    pack = _LEN.pack
    for item in array.reshape(-1) if array.ndim else array.reshape(1):
        if isinstance(item, (bytes, bytearray, memoryview)):
            data = bytes(item)
        elif isinstance(item, str):
            data = item.encode("utf-8")
        elif isinstance(item, np.bytes_):
            data = bytes(item)
        else:
            data = str(item).encode("utf-8")
        append(pack(len(data)))
        append(data)
    return b"".join(parts)


def bytes_element_count(buffer: Any, limit: int | None = None) -> int:
    """Count the elements of a serialized BYTES buffer; raise ValueError if it is malformed."""
    view = memoryview(buffer).cast("B")
    size = len(view)
    pos = 0
    count = 0
    unpack = _LEN.unpack_from
    while pos < size:
        if pos + 4 > size:
            raise ValueError("element byte size truncated")
        (length,) = unpack(view, pos)
        pos += 4 + length
        if pos > size:
            raise ValueError("element byte size exceeds the buffer")
        count += 1
        if limit is not None and count > limit:
            break
    return count


def deserialize_bytes_tensor(buffer: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Decode a Triton BYTES buffer into an object array of `bytes` (reshaped if a shape is given)."""
    view = memoryview(buffer).cast("B")
    items: list[bytes] = []
    append = items.append
    unpack = _LEN.unpack_from
    pos = 0
    size = len(view)
    while pos < size:
        (length,) = unpack(view, pos)
        start = pos + 4
        pos = start + length
        append(bytes(view[start:pos]))
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out.reshape(shape) if shape is not None else out


def tensor_to_bytes(array: np.ndarray, datatype: str) -> Any:
    """Return a buffer with the wire bytes of `array` (no copy for C-contiguous fixed-size arrays)."""
    if datatype == "BYTES":
        return serialize_bytes_tensor(array)
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    return array.reshape(-1).view(np.uint8).data if array.size else b""


def bytes_to_array(buffer: Any, datatype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Return a numpy array for wire bytes: a view for fixed-size types, a decoded array for BYTES."""
    if datatype == "BYTES":
        return deserialize_bytes_tensor(buffer, shape)
    return np.frombuffer(buffer, dtype=TRITON_TO_NUMPY[datatype]).reshape(shape)
