"""``Tensor``: a data type, a shape and a ``MemoryBuffer``, exchanged with numpy, cupy and torch by DLPack.

Fixed-size types are shared without a copy both ways (``Tensor.from_dlpack(array)``,
``numpy.from_dlpack(tensor)``). BYTES tensors hold Triton's serialized form: each element is a
4-byte little-endian length followed by its bytes, in C order.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy

from pytriton.tritonserver import _dlpack
from pytriton.tritonserver._enums import DataType, DLDeviceType, MemoryType
from pytriton.tritonserver._errors import InvalidArgumentError, UnsupportedError
from pytriton.tritonserver._memory import (
    DeviceOrMemoryType,
    MemoryAllocator,
    MemoryBuffer,
    _cupy,
    copy_bytes,
    default_memory_allocators,
    parse_device_or_memory_type,
    place_in_allocated,
)

_NUMPY_TO_TRITON: dict[type, DataType] = {
    numpy.bool_: DataType.BOOL,
    numpy.int8: DataType.INT8,
    numpy.int16: DataType.INT16,
    numpy.int32: DataType.INT32,
    numpy.int64: DataType.INT64,
    numpy.uint8: DataType.UINT8,
    numpy.uint16: DataType.UINT16,
    numpy.uint32: DataType.UINT32,
    numpy.uint64: DataType.UINT64,
    numpy.float16: DataType.FP16,
    numpy.float32: DataType.FP32,
    numpy.float64: DataType.FP64,
    numpy.bytes_: DataType.BYTES,
    numpy.str_: DataType.BYTES,
    numpy.object_: DataType.BYTES,
}
_TRITON_TO_NUMPY: dict[DataType, type] = {
    value: key for key, value in _NUMPY_TO_TRITON.items() if key not in (numpy.bytes_, numpy.str_)
}
_HOST = (MemoryType.CPU, MemoryType.CPU_PINNED)
_LENGTH = struct.Struct("<I")


@dataclass
class Tensor:
    """Class representing a Tensor.

    Args:
        data_type: Data type of the tensor.
        shape: Shape of the tensor.
        memory_buffer: Memory buffer containing the tensor data.
    """

    data_type: DataType
    shape: Sequence[int]
    memory_buffer: MemoryBuffer

    @property
    def data_ptr(self) -> int:
        """The pointer to the tensor's data."""
        return self.memory_buffer.data_ptr

    @property
    def memory_type(self) -> MemoryType:
        """The memory type of the tensor."""
        return self.memory_buffer.memory_type

    @property
    def memory_type_id(self) -> int:
        """The ID representing the memory type of the tensor (the device id)."""
        return self.memory_buffer.memory_type_id

    @property
    def size(self) -> int:
        """The size of the tensor's data in bytes."""
        return self.memory_buffer.size

    # --- DLPack -------------------------------------------------------------------------------

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule over this tensor's memory (no copy, writable); it keeps the tensor alive.

        Raises:
            InvalidArgumentError: for BYTES tensors (DLPack has no variable-size type).
            UnsupportedError: a stream that cannot be synchronized with.
            BufferError: a copy or another device requested (the consumer then copies itself).
        """
        if copy or (dl_device is not None and tuple(dl_device) != self.__dlpack_device__()):
            raise BufferError("Tensor exports its own memory only: no copy, no other device")
        self._sync_on_requested_stream(stream)
        return _dlpack.make_capsule(
            self, self.data_ptr, self.data_type, list(self.shape), self.memory_type, self.memory_type_id, max_version
        )

    def __dlpack_device__(self) -> tuple[DLDeviceType, int]:
        """The DLPack device: (kDLCPU, 0) for host memory, (kDLCUDA, device) for GPU memory."""
        return _dlpack.device_type_of(self.memory_type), self.memory_type_id

    def _sync_on_requested_stream(self, stream: Any) -> None:
        if stream is not None and not isinstance(stream, int):
            raise UnsupportedError(f"DLPack stream synchronization on stream {stream} not supported")
        if self.memory_type != MemoryType.GPU:
            if stream not in (None, 0, -1):
                raise UnsupportedError(
                    f"DLPack stream synchronization on memory type {self.memory_type} and stream {stream} not supported"
                )
            return
        cupy = _cupy()
        if stream in (None, -1) or cupy is None:
            return
        with cupy.cuda.Device(self.memory_type_id):
            current = cupy.cuda.get_current_stream()
            requested = {0: cupy.cuda.Stream.null.ptr, 1: cupy.cuda.Stream.null.ptr, 2: cupy.cuda.Stream.ptds.ptr}.get(
                stream, stream
            )
            if current.ptr != requested:
                cupy.cuda.ExternalStream(requested).wait_event(current.record())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> numpy.ndarray:
        """``numpy.array(tensor)`` / ``numpy.asarray(tensor)`` for tensors in host memory."""
        if self.memory_type not in _HOST:
            raise UnsupportedError(
                f"Tensor in {self.memory_type} memory: call to_host() before converting it to numpy"
            )
        array = self._to_numpy()
        if dtype is not None and array.dtype != dtype:
            return array.astype(dtype)
        return array.copy() if copy else array

    # --- construction -------------------------------------------------------------------------

    @staticmethod
    def from_dlpack(obj: Any) -> Tensor:
        """Create a tensor over the memory of a DLPack-compatible object, without a copy.

        Raises:
            InvalidArgumentError: the object does not support DLPack, is not contiguous, or has a type
                Triton does not know.

        Examples:
            tensor = Tensor.from_dlpack(numpy.array([0,1,2], dtype=numpy.float16))
        """
        view = _dlpack.read_dlpack(obj)
        data_type = view.data_type
        return Tensor(data_type, view.shape, MemoryBuffer._from_view(obj, view))

    @staticmethod
    def from_bytes_array(bytes_array: list[str] | list[bytes] | numpy.ndarray) -> Tensor:
        """Create a Triton BYTES tensor (serialized into new host memory) from a list or a numpy array.

        Raises:
            InvalidArgumentError: If the given object can not be converted.

        Examples:
            tensor = Tensor.from_bytes_array(numpy.array(["hello"]))
        """
        result = Tensor._from_object(bytes_array)
        if result.data_type != DataType.BYTES:
            raise InvalidArgumentError(
                f"Unsupported conversion from {bytes_array} to Triton BYTES Tensor. Got {result.data_type}"
            )
        return result

    @staticmethod
    def from_string_array(string_array: list[str] | numpy.ndarray) -> Tensor:
        """Create a Triton BYTES tensor from a list or numpy array of strings (UTF-8 encoded).

        Raises:
            InvalidArgumentError: If the given object can not be converted.
        """
        return Tensor.from_bytes_array(string_array)

    @staticmethod
    def _from_object(obj: Any, name: str | None = None) -> Tensor:
        """A tensor from a Tensor, a DLPack object, a numpy array or anything numpy can convert.

        Raises:
            InvalidArgumentError: the object cannot be converted (the message names the input).
        """
        if isinstance(obj, Tensor):
            return obj
        if isinstance(obj, (numpy.ndarray, numpy.generic)):
            return Tensor._from_numpy(obj, name)
        if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
            return Tensor.from_dlpack(obj)
        try:
            array = numpy.asarray(obj)
        except Exception as e:  # noqa: BLE001 - numpy raises many kinds for ragged or odd objects
            about = f" of input '{name}'" if name else ""
            raise InvalidArgumentError(
                f"Conversion from {type(obj).__name__}{about} to tensor not supported: {e}"
            ) from e
        return Tensor._from_numpy(array, name)

    @staticmethod
    def _from_numpy(array: numpy.ndarray | numpy.generic, name: str | None = None) -> Tensor:
        ndarray = numpy.asarray(array)
        data_type = _NUMPY_TO_TRITON.get(ndarray.dtype.type)
        if data_type is None:
            about = f" of input '{name}'" if name else ""
            raise InvalidArgumentError(
                f"Unsupported Numpy data type{about}. Can't convert {ndarray.dtype} to Triton server data type"
            )
        shape = list(ndarray.shape)
        if data_type == DataType.BYTES:
            ndarray = _serialize_bytes(ndarray)
        elif not ndarray.flags.c_contiguous:
            ndarray = numpy.ascontiguousarray(ndarray)
        buffer = MemoryBuffer(ndarray.ctypes.data, MemoryType.CPU, 0, ndarray.nbytes, ndarray)
        return Tensor(data_type, shape, buffer)

    # --- conversion ---------------------------------------------------------------------------

    def to_bytes_array(self) -> numpy.ndarray:
        """Deserialize a BYTES tensor (copied to the host first if needed) into a numpy array of bytes objects.

        Raises:
            InvalidArgumentError: the tensor is not BYTES, or its data is not Triton's serialized form.
        """
        if self.data_type != DataType.BYTES:
            raise InvalidArgumentError(f"Tensor has data type {self.data_type} not {DataType.BYTES}")
        host = self.to_host()
        items = _deserialize_bytes(host.memory_buffer._raw().host_array())
        count = math.prod(self.shape)
        if len(items) != count:
            raise InvalidArgumentError(
                f"BYTES tensor of shape {list(self.shape)} holds {len(items)} elements, expected {count}"
            )
        result = numpy.empty(len(items), dtype=numpy.object_)
        result[:] = items
        return result.reshape(tuple(self.shape))

    def to_string_array(self) -> numpy.ndarray:
        """Deserialize a BYTES tensor into a numpy array of str (elements decoded as UTF-8).

        Raises:
            InvalidArgumentError: the tensor is not BYTES, or an element is not valid UTF-8.
        """
        items = self.to_bytes_array()
        try:
            decoded = [item.decode("utf-8") for item in items.flat]
        except UnicodeDecodeError as e:
            raise InvalidArgumentError(f"BYTES tensor element is not UTF-8: {e}") from e
        return numpy.array(decoded, dtype=numpy.str_).reshape(items.shape)

    def to_host(self) -> Tensor:
        """The tensor in CPU memory (itself when already in host memory)."""
        return self.to_device("cpu")

    def to_device(self, device: DeviceOrMemoryType) -> Tensor:
        """The tensor moved to ``device`` (itself when already there): "cpu", "gpu:1", MemoryType.GPU,
        (MemoryType.GPU, 0) or (DLDeviceType.kDLCUDA, 0).

        Raises:
            InvalidArgumentError: an unknown device.
            UnsupportedError: GPU memory without cupy or torch.
        """
        memory_type, memory_type_id = parse_device_or_memory_type(device)
        if self.memory_type == memory_type and (memory_type != MemoryType.GPU or self.memory_type_id == memory_type_id):
            return self
        if self.memory_type == MemoryType.CPU_PINNED and memory_type == MemoryType.CPU:
            return self
        allocator = default_memory_allocators.get(memory_type)
        if allocator is None:
            raise UnsupportedError(
                f"Conversion from {(self.memory_type, self.memory_type_id)} to {(memory_type, memory_type_id)} "
                "not supported."
            )
        buffer = allocator.allocate(self.size, memory_type, memory_type_id)
        copy_bytes(buffer, self.memory_buffer, self.size)
        return Tensor(self.data_type, list(self.shape), buffer)

    def _to_numpy(self) -> numpy.ndarray:
        """A numpy view of host memory without a copy (BYTES: the deserialized object array).

        Raises:
            UnsupportedError: device memory, or BF16 (numpy has no bfloat16).
        """
        if self.memory_type not in _HOST:
            raise UnsupportedError(f"Conversion from {self.memory_type} to numpy array not supported.")
        if self.data_type == DataType.BYTES:
            return self.to_bytes_array()
        if self.data_type not in _TRITON_TO_NUMPY:
            raise UnsupportedError(f"Conversion from {self.data_type} to numpy array not supported.")
        return numpy.from_dlpack(self)

    def _place(
        self, allocator: MemoryAllocator, memory_type: MemoryType, memory_type_id: int, name: str = ""
    ) -> Tensor:
        """This tensor copied into memory from ``allocator`` (for outputs a request asks to land there).

        Raises:
            InternalError: the allocator failed or returned too little memory.
        """
        host = self.to_host()
        data = host.memory_buffer._raw().host_array()
        buffer = place_in_allocated(data, allocator, memory_type, memory_type_id, name)
        if buffer.size != self.size:  # the allocator may hand out more than asked: the tensor keeps its size
            buffer = MemoryBuffer(buffer.data_ptr, buffer.memory_type, buffer.memory_type_id, self.size, buffer.owner)
        return Tensor(self.data_type, list(self.shape), buffer)


def _serialize_bytes(array: numpy.ndarray) -> numpy.ndarray:
    """Triton's BYTES form of an array of bytes/str/objects: per element a uint32 length, then the bytes."""
    parts: list[bytes] = []
    for element in array.reshape(-1):
        item = element.item() if isinstance(element, numpy.generic) else element
        if not isinstance(item, bytes):
            item = str(item).encode("utf-8")
        parts.append(_LENGTH.pack(len(item)))
        parts.append(item)
    return numpy.frombuffer(b"".join(parts), dtype=numpy.byte)


def _deserialize_bytes(data: numpy.ndarray) -> list[bytes]:
    view = memoryview(data.tobytes() if not data.flags.c_contiguous else data.data).cast("B")
    items: list[bytes] = []
    offset = 0
    while offset < len(view):
        if offset + 4 > len(view):
            raise InvalidArgumentError(
                f"BYTES tensor data is truncated: {len(view) - offset} bytes after element {len(items)}"
            )
        (length,) = _LENGTH.unpack_from(view, offset)
        offset += 4
        if offset + length > len(view):
            raise InvalidArgumentError(f"BYTES tensor element {len(items)} of {length} bytes runs past the data")
        items.append(bytes(view[offset : offset + length]))
        offset += length
    return items
