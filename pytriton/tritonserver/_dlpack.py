"""DLPack capsules read and made with ctypes, so tensors cross to numpy, cupy and torch without a copy.

Structures follow ``dlpack.h`` (legacy, unversioned ``DLManagedTensor``, the capsule name
``dltensor``), which every consumer accepts. A capsule made here keeps the exporting object alive
through a manager context until the consumer calls the deleter (or the capsule dies unconsumed).
"""

from __future__ import annotations

import ctypes
import itertools
import math
from dataclasses import dataclass
from typing import Any

from pytriton.tritonserver._enums import DataType, DLDeviceType, MemoryType
from pytriton.tritonserver._errors import InvalidArgumentError

_CAPSULE_NAME = b"dltensor"
_VERSIONED_CAPSULE_NAME = b"dltensor_versioned"  # DLPack >= 1.0: carries a read-only flag (numpy honours it)

# Private prototypes (never the shared ctypes.pythonapi attributes, which other packages configure too).
_api = ctypes.pythonapi
_raw_malloc = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)(("PyMem_RawMalloc", _api))
_raw_free = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(("PyMem_RawFree", _api))
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _api)
)
_object_is_capsule = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_object_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
# The capsule destructor gets a borrowed PyObject* of a dying object: read it by address, never as
# a py_object (which would take a reference to it).
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("type_code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# DLDataTypeCode values (dlpack.h)
_kDLInt, _kDLUInt, _kDLFloat, _kDLBfloat, _kDLBool = 0, 1, 2, 4, 6

_DLPACK_TO_TRITON: dict[tuple[int, int], DataType] = {
    (_kDLBool, 8): DataType.BOOL,
    (_kDLInt, 8): DataType.INT8,
    (_kDLInt, 16): DataType.INT16,
    (_kDLInt, 32): DataType.INT32,
    (_kDLInt, 64): DataType.INT64,
    (_kDLUInt, 8): DataType.UINT8,
    (_kDLUInt, 16): DataType.UINT16,
    (_kDLUInt, 32): DataType.UINT32,
    (_kDLUInt, 64): DataType.UINT64,
    (_kDLFloat, 16): DataType.FP16,
    (_kDLFloat, 32): DataType.FP32,
    (_kDLFloat, 64): DataType.FP64,
    (_kDLBfloat, 16): DataType.BF16,
}
_TRITON_TO_DLPACK = {value: key for key, value in _DLPACK_TO_TRITON.items()}

_DEVICE_TO_MEMORY_TYPE = {
    DLDeviceType.kDLCPU: MemoryType.CPU,
    DLDeviceType.kDLCUDAHost: MemoryType.CPU_PINNED,
    DLDeviceType.kDLCUDA: MemoryType.GPU,
}


def memory_type_of(device_type: int) -> MemoryType:
    """The Triton memory type for a DLPack device type (CPU, CUDA host or CUDA)."""
    try:
        return _DEVICE_TO_MEMORY_TYPE[DLDeviceType(device_type)]
    except (KeyError, ValueError):
        raise InvalidArgumentError(
            f"Unsupported DLPack device type. Can't convert {device_type} to Triton server memory type"
        ) from None


def device_type_of(memory_type: MemoryType) -> DLDeviceType:
    """The DLPack device type a tensor in ``memory_type`` is exported as (pinned host memory as CPU)."""
    return DLDeviceType.kDLCUDA if memory_type == MemoryType.GPU else DLDeviceType.kDLCPU


def element_size(data_type: DataType) -> int:
    """Bytes per element of a fixed-size Triton type (BYTES has no fixed size)."""
    if data_type not in _TRITON_TO_DLPACK:
        raise InvalidArgumentError(f"Data type {data_type} has no fixed element size")
    return _TRITON_TO_DLPACK[data_type][1] // 8


@dataclass(frozen=True)
class DLPackView:
    """What a producer's capsule describes, read before the capsule is released."""

    data_ptr: int
    memory_type: MemoryType
    memory_type_id: int
    data_type_code: tuple[int, int]
    shape: list[int]
    contiguous: bool

    @property
    def data_type(self) -> DataType:
        try:
            return _DLPACK_TO_TRITON[self.data_type_code]
        except KeyError:
            raise InvalidArgumentError(
                f"Unsupported DLPack data type. Can't convert {self.data_type_code} to Triton server data type"
            ) from None

    @property
    def byte_size(self) -> int:
        return math.prod(self.shape) * self.data_type_code[1] // 8


def read_dlpack(obj: Any) -> DLPackView:
    """Ask ``obj`` for a DLPack capsule and read its tensor description (data stays owned by ``obj``).

    Raises:
        InvalidArgumentError: if ``obj`` does not speak DLPack or its capsule cannot be read.
    """
    try:
        device_type, device_id = obj.__dlpack_device__()
        kwargs: dict[str, Any] = {"stream": 1} if device_type == DLDeviceType.kDLCUDA else {}  # legacy default stream
        try:
            capsule = obj.__dlpack__(max_version=(1, 0), **kwargs)  # read-only numpy arrays need >= 1.0
        except TypeError:
            capsule = obj.__dlpack__(**kwargs)
        if _object_is_capsule(capsule, _VERSIONED_CAPSULE_NAME):
            address = _object_pointer(capsule, _VERSIONED_CAPSULE_NAME)
            tensor = DLManagedTensorVersioned.from_address(address).dl_tensor
        else:
            address = _object_pointer(capsule, _CAPSULE_NAME)
            tensor = DLManagedTensor.from_address(address).dl_tensor
        shape = [int(tensor.shape[i]) for i in range(tensor.ndim)]
        strides = None if not tensor.strides else [int(tensor.strides[i]) for i in range(tensor.ndim)]
        view = DLPackView(
            data_ptr=int(tensor.data or 0) + int(tensor.byte_offset),
            memory_type=memory_type_of(tensor.device.device_type),
            memory_type_id=int(tensor.device.device_id),
            data_type_code=(int(tensor.dtype.type_code), int(tensor.dtype.bits) * int(tensor.dtype.lanes)),
            shape=shape,
            contiguous=_is_contiguous(shape, strides),
        )
    except InvalidArgumentError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of the producer means "not DLPack"
        raise InvalidArgumentError(f"Object does not support DLPack protocol: {e}") from None
    del capsule  # unconsumed: its destructor hands the producer's tensor back
    return view


def _is_contiguous(shape: list[int], strides: list[int] | None) -> bool:
    if strides is None or math.prod(shape) == 0:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


class _ManagerContext:
    """Keeps the exported object and the shape array alive while a consumer holds the capsule."""

    __slots__ = ("exporter", "shape")

    def __init__(self, exporter: Any, shape: list[int]):
        self.exporter = exporter
        self.shape = (ctypes.c_int64 * len(shape))(*shape)


_contexts: dict[int, _ManagerContext] = {}
_context_ids = itertools.count(1)


@_Deleter
def _managed_tensor_deleter(address: int) -> None:
    _contexts.pop(int(DLManagedTensor.from_address(address).manager_ctx or 0), None)
    _raw_free(address)


@_Deleter
def _versioned_tensor_deleter(address: int) -> None:
    _contexts.pop(int(DLManagedTensorVersioned.from_address(address).manager_ctx or 0), None)
    _raw_free(address)


@_Deleter
def _capsule_destructor(capsule_address: int) -> None:
    if _capsule_is_valid(capsule_address, _CAPSULE_NAME):  # renamed "used_dltensor" once consumed
        _managed_tensor_deleter(_capsule_pointer(capsule_address, _CAPSULE_NAME))


@_Deleter
def _versioned_capsule_destructor(capsule_address: int) -> None:
    if _capsule_is_valid(capsule_address, _VERSIONED_CAPSULE_NAME):
        _versioned_tensor_deleter(_capsule_pointer(capsule_address, _VERSIONED_CAPSULE_NAME))


def make_capsule(
    exporter: Any,
    data_ptr: int,
    data_type: DataType,
    shape: list[int],
    memory_type: MemoryType,
    memory_type_id: int,
    max_version: tuple[int, int] | None = None,
) -> Any:
    """A DLPack capsule over ``data_ptr`` (C order, compact, writable) that keeps ``exporter`` alive.

    A versioned (1.0) capsule when the consumer's ``max_version`` allows it, else a legacy one.

    Raises:
        InvalidArgumentError: for BYTES (and other types DLPack cannot describe).
    """
    if data_type not in _TRITON_TO_DLPACK:
        raise InvalidArgumentError(
            f"Unsupported Triton server data type. Can't convert {data_type} to DLPack data type"
        )
    versioned = max_version is not None and max_version[0] >= 1
    structure = DLManagedTensorVersioned if versioned else DLManagedTensor
    address = _raw_malloc(ctypes.sizeof(structure))
    if not address:
        raise MemoryError("cannot allocate a DLPack managed tensor")
    context = _ManagerContext(exporter, shape)
    key = next(_context_ids)
    _contexts[key] = context
    managed: Any = structure.from_address(address)
    tensor = managed.dl_tensor
    tensor.data = data_ptr
    tensor.device = DLDevice(int(device_type_of(memory_type)), memory_type_id)
    tensor.ndim = len(shape)
    type_code, bits = _TRITON_TO_DLPACK[data_type]
    tensor.dtype = DLDataType(type_code, bits, 1)
    tensor.shape = ctypes.cast(context.shape, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = ctypes.POINTER(ctypes.c_int64)()
    tensor.byte_offset = 0
    managed.manager_ctx = key
    if versioned:
        managed.version = DLPackVersion(1, 0)
        managed.flags = 0
        managed.deleter = _versioned_tensor_deleter
        name, destructor = _VERSIONED_CAPSULE_NAME, _versioned_capsule_destructor
    else:
        managed.deleter = _managed_tensor_deleter
        name, destructor = _CAPSULE_NAME, _capsule_destructor
    return _capsule_new(address, name, ctypes.cast(destructor, ctypes.c_void_p))
