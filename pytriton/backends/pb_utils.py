"""`triton_python_backend_utils` (imported as `pb_utils` by Triton Python-backend models): the tensors, requests,
responses, errors and helpers such a `model.py` uses, as Triton's python_backend defines them.

Registered under that module name in a worker that runs a repository model (`python_model.py`). BLS requests
(`InferenceRequest.exec`) and the model loading API (`load_model`, `unload_model`, `is_model_ready`) go through the
worker's `BlsClient` (`bls.py`); `ModelConfig`, the auto-complete helper, is
in `pb_autocomplete.py`; custom metrics (`MetricFamily`) live in `pb_metrics.py`.
"""

from __future__ import annotations

import ctypes
import enum
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:
    from pytriton.backends.model_log import ModelLogGate

from pytriton.backends.pb_autocomplete import ModelConfig  # noqa: F401 - pb_utils.ModelConfig (auto-complete)
from pytriton.backends.pb_bytes import (  # noqa: F401 - pb_utils' byte-tensor and datatype helpers
    deserialize_bytes_tensor,
    numpy_to_triton_type,
    serialize_byte_tensor,
    triton_to_numpy_type,
)

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

# The numpy type of each configuration datatype, as Triton's module spells the table (TYPE_BOOL is Python's bool;
# TYPE_BF16 has no numpy type and is not in it).
TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}


class MemoryType(enum.IntEnum):
    """Where a BLS request would like its outputs (`PreferredMemory`); Triton's PreferredMemory::MemoryType."""

    TRITONSERVER_MEMORY_GPU = 0
    TRITONSERVER_MEMORY_CPU = 1


TRITONSERVER_MEMORY_GPU = MemoryType.TRITONSERVER_MEMORY_GPU
TRITONSERVER_MEMORY_CPU = MemoryType.TRITONSERVER_MEMORY_CPU

_logger = logging.getLogger("pytriton.backends.model")

# The worker's BLS client (backends/bls.BlsClient), set once the worker serves; None elsewhere.
_bls_client: Any = None
# Set by the worker while the model's finalize() runs: BLS is refused there in Triton's words.
_finalizing = False
# The version folder of the model this process runs or auto-completes (get_model_dir); None elsewhere.
_model_dir: str | None = None


def _wrong_kind(call: str, argument: str, kind: str, value: Any) -> TypeError:
    """An argument of the wrong kind: TypeError, as Triton's pybind11 bindings refuse it before the call runs."""
    return TypeError(f"{call}: incompatible arguments: {argument} must be {kind}, got {type(value).__name__}")


def _integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer))


def _sequence(value: Any) -> bool:
    """A list as pybind11 takes one for a `List[...]` argument: a list or a tuple (not a string, not None)."""
    return isinstance(value, (list, tuple))


class TritonModelException(Exception):
    """What Triton raises into a model when a pb_utils call fails."""


class TritonError:
    """An error a response carries (`InferenceResponse(error=...)`): a message and one of Triton's codes."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message: str, code: int = INTERNAL):
        self._message = str(message)
        self._code = int(code)

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, code={self._code})"


class PreferredMemory:
    """The memory a BLS request would like its outputs in (`InferenceRequest(preferred_memory=...)`). Taken and kept;
    a BLS answer comes in host memory here whatever it says."""

    def __init__(self, preferred_memory_type: MemoryType | int, preferred_device_id: int = 0):
        self.preferred_memory_type = MemoryType(preferred_memory_type)
        self.preferred_device_id = int(preferred_device_id)

    def __repr__(self) -> str:
        return f"PreferredMemory({self.preferred_memory_type.name}, {self.preferred_device_id})"


class InferenceTrace:
    """A request's trace (`InferenceRequest.trace()`): `get_context()` is the trace context of a traced request, None
    when it is not traced (a model's requests carry none here)."""

    def __init__(self, context: str = ""):
        self._context = context

    def get_context(self) -> str | None:
        return self._context or None


class Tensor:
    """A named tensor; inputs are numpy views on the request's shared memory (no copy), or, for a model whose
    config sets FORCE_CPU_ONLY_INPUT_TENSORS to "no", device arrays (cupy) where the input lies on a GPU."""

    def __init__(self, name: str, tensor: Any):
        if not isinstance(name, str):
            raise _wrong_kind("Tensor()", "the name", "a str", name)
        if not isinstance(tensor, np.ndarray):
            raise _wrong_kind("Tensor()", f"the array of tensor '{name}'", "a numpy array (use "
                              "pb_utils.Tensor.from_dlpack for other arrays)", tensor)
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        self._name = name
        self._array: Any = tensor

    @classmethod
    def _on_device(cls, name: str, array: Any) -> Tensor:
        """A tensor in GPU memory (an array with `__cuda_array_interface__`, e.g. cupy)."""
        return cls._wrap(name, array)

    @classmethod
    def _wrap(cls, name: str, array: Any) -> Tensor:
        """A tensor of an array the worker has checked already (a request's input): no check again."""
        tensor = cls.__new__(cls)
        tensor._name = name
        tensor._array = array
        return tensor

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        array = self._array
        if not isinstance(array, np.ndarray):  # (is_cpu() without the call)
            raise TritonModelException("Tensor is stored in GPU and cannot be converted to NumPy.")
        return cast(np.ndarray, array)

    def _value(self) -> Any:
        """The array itself, in host or device memory."""
        return self._array

    def _host(self) -> np.ndarray:
        """The array in host memory (a device array is copied)."""
        return cast(np.ndarray, self._array if self.is_cpu() else __import__("cupy").asnumpy(self._array))

    def is_cpu(self) -> bool:
        return isinstance(self._array, np.ndarray)

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def triton_dtype(self) -> int | None:
        """The TRITONSERVER_DataType number of the tensor's datatype (FP32: 11, BYTES: 13)."""
        return numpy_to_triton_type(self._array.dtype)

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        """The DLPack protocol, so that `np.from_dlpack(tensor)` (or torch's, cupy's) takes the tensor itself; the
        protocol's newer arguments (max_version, ...) go to the array's own export."""
        if stream is not None:
            kwargs["stream"] = stream
        try:
            return self._array.__dlpack__(**kwargs)
        except BufferError:  # a read-only input, to a consumer that cannot be told so (no max_version): a copy
            if not isinstance(self._array, np.ndarray) or self._array.flags.writeable:
                raise
            return self._array.copy().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        device_type, device_id = self._array.__dlpack_device__()
        return int(device_type), int(device_id)

    def to_dlpack(self) -> Any:
        """A DLPack capsule of the array (numpy's or cupy's own export: on the device for a GPU tensor). A read-only
        host array (an input: a view on shared memory) is exported as a copy: a (legacy) capsule cannot say
        read-only, and what takes it (torch, cupy) may write into it, as into Triton's own per-request copy."""
        return self.__dlpack__()  # (asked without max_version: a legacy capsule)

    @staticmethod
    def from_dlpack(name: str, capsule: Any) -> Tensor:
        """A tensor from an object that exports DLPack: a CPU array, or a GPU one (torch, cupy: kept on the device,
        read with cupy)."""
        if not isinstance(name, str):
            raise _wrong_kind("from_dlpack()", "the name", "a str", name)
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        if isinstance(capsule, np.ndarray):
            return Tensor(name, capsule)
        if type(capsule).__name__ == "PyCapsule":  # what to_dlpack() gives (this module's, torch's, cupy's)
            if _capsule_device(capsule) == _DL_CUDA:
                return Tensor._on_device(name, __import__("cupy").from_dlpack(capsule))
            return Tensor(name, np.from_dlpack(_Capsule(capsule)))
        device = getattr(capsule, "__dlpack_device__", None)
        if device is None or not hasattr(capsule, "__dlpack__"):
            raise TritonModelException("Provided tensor is not supported. Tensor must be a DLPack capsule or have "
                                       "`__dlpack__` and `__dlpack_device__` attributes")
        if int(device()[0]) == _DL_CUDA:
            return Tensor._on_device(name, __import__("cupy").from_dlpack(capsule))
        return Tensor(name, np.from_dlpack(capsule))

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, {self._array.dtype}, {list(self._array.shape)})"


_DL_CUDA = 2  # DLPack's kDLCUDA
_DL_CPU = 1
# Where a capsule's DLTensor keeps its device (DLDevice: two int32, type then id), after the tensor's data pointer:
# a "dltensor" capsule points at a DLManagedTensor (the DLTensor first), a "dltensor_versioned" one at a
# DLManagedTensorVersioned (its version, manager context, deleter and flags come first: 32 bytes).
_DEVICE_OFFSET = {b"dltensor": 8, b"dltensor_versioned": 40}


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _capsule_device(capsule: Any) -> int:
    """The DLPack device type of a capsule not yet consumed (ValueError for one that was, or is no DLPack one)."""
    name = _capsule_name(capsule)
    if name not in _DEVICE_OFFSET:
        raise ValueError(f"from_dlpack: a capsule named {name!r} is not a DLPack tensor that can still be taken "
                         "(a capsule can be taken once)")
    return int(ctypes.c_int32.from_address(_capsule_pointer(capsule, name) + _DEVICE_OFFSET[name]).value)


class _Capsule:
    """A host DLPack capsule as numpy's `from_dlpack` takes a tensor: an object that hands it over."""

    __slots__ = ("_capsule",)

    def __init__(self, capsule: Any):
        self._capsule = capsule

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return _DL_CPU, 0


class InferenceResponse:
    """One request's answer: its output tensors, or an error (that fails only this request)."""

    def __init__(self, output_tensors: list[Tensor] | tuple[Tensor, ...] = (), error: TritonError | None = None,
                 parameters: dict[str, Any] | str | None = None):
        if not _sequence(output_tensors) or not all(t is None or isinstance(t, Tensor) for t in output_tensors):
            raise _wrong_kind("InferenceResponse()", "output_tensors", "a list of pb_utils.Tensor", output_tensors)
        if error is not None and not isinstance(error, TritonError):
            raise _wrong_kind("InferenceResponse()", "error", "a pb_utils.TritonError or None", error)
        if None in output_tensors:
            raise TritonModelException("Output tensor for inference response should not be empty.")
        self._outputs = list(output_tensors)
        self._error = error
        if isinstance(parameters, str):
            parameters = json.loads(parameters) if parameters else {}
        self._parameters: dict[str, Any] = dict(parameters or {})
        self._flags = 0  # a BLS answer from a decoupled model: TRITONSERVER_RESPONSE_COMPLETE_FINAL on the last

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        return json.dumps(self._parameters)


class InferenceResponseSender:
    """A decoupled model's way to answer one request: any number of responses, then the final flag."""

    def __init__(self, index: int, put: Callable[[int, InferenceResponse | None, int], None]):
        self._index = index
        self._put = put
        self._closed = False
        self._cancelled: Callable[[], bool] | None = None

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if self._closed:
            raise TritonModelException("Unable to send response. Response sender has been closed.")
        if response is not None and not isinstance(response, InferenceResponse):
            raise TypeError(f"send() takes a pb_utils.InferenceResponse, got {type(response).__name__}")
        if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):  # (Triton's words; the sender stays open)
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        if flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            self._closed = True
        self._put(self._index, response, flags)

    def is_cancelled(self) -> bool:
        """True once the client of this request went away."""
        return self._cancelled is not None and self._cancelled()


class _OneResponseSender(InferenceResponseSender):
    """The response sender of a model that is not decoupled (Triton's Python backend allows one): it answers its
    request with one response, and the final flag (with that response or after it), during `execute` or after it
    returned. Its refusals are Triton's, in Triton's words."""

    def __init__(self, index: int, put: Callable[[int, InferenceResponse | None, int], None]):
        super().__init__(index, put)
        self._sent = 0  # (as Triton counts: every send, the final flag alone too)

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if response is not None and not isinstance(response, InferenceResponse):
            raise TypeError(f"send() takes a pb_utils.InferenceResponse, got {type(response).__name__}")
        if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        self._count(response, flags)
        self._put(self._index, response, flags)

    def _count(self, response: InferenceResponse | None, flags: int) -> None:
        """Triton's checks of one more answer (a send, or the response `execute` returns for this request)."""
        if response is not None and self._sent:
            raise TritonModelException("Unable to send response. Non-decoupled model cannot send more than one "
                                       "response.")
        if response is None and flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL and not self._sent:
            raise TritonModelException("Unable to send response. Non-decoupled model cannot send complete final "
                                       "before sending a response.")
        if self._closed:
            raise TritonModelException("Unable to send response. Response sender has been closed.")
        if flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            self._closed = True
        self._sent += 1


def _check_request_arguments(model_name: Any, inputs: Any, requested: Any, model_version: Any,
                             kwargs: dict[str, Any]) -> None:
    """InferenceRequest's arguments of the wrong kind, refused with TypeError as Triton's bindings refuse them."""
    call = "InferenceRequest()"
    if not isinstance(model_name, str):
        raise _wrong_kind(call, "model_name", "a str", model_name)
    if not _sequence(inputs) or not all(t is None or isinstance(t, Tensor) for t in inputs):
        raise _wrong_kind(call, "inputs", "a list of pb_utils.Tensor", inputs)
    if not _sequence(requested) or not all(isinstance(n, str) for n in requested):
        raise _wrong_kind(call, "requested_output_names", "a list of str", requested)
    if not _integer(model_version):
        raise _wrong_kind(call, "model_version", "an int", model_version)
    if "correlation_id" in kwargs and kwargs["correlation_id"] is None:  # (another kind: TritonModelException)
        raise _wrong_kind(call, "correlation_id", "an int or a str", None)
    for key, kind, wanted in (("request_id", "a str", str), ("flags", "an int", None), ("timeout", "an int", None),
                              ("preferred_memory", "a pb_utils.PreferredMemory", PreferredMemory),
                              ("trace", "a pb_utils.InferenceTrace", InferenceTrace)):
        if key in kwargs:
            value = kwargs[key]
            if not (isinstance(value, wanted) if wanted is not None else _integer(value)):
                raise _wrong_kind(call, key, kind, value)


class InferenceRequest:
    """A request the model receives in `execute`; or one a model builds itself and runs with `exec()` or
    `async_exec()` on any model the server serves (BLS)."""

    # A received request of a model that is not decoupled: makes its response sender, once asked for (None elsewhere)
    _make_sender: Callable[[], InferenceResponseSender] | None = None

    def __init__(self, model_name: str = "", inputs: list[Tensor] | tuple[Tensor, ...] = (),
                 requested_output_names: list[str] | tuple[str, ...] = (), model_version: int = -1, **kwargs: Any):
        _check_request_arguments(model_name, inputs, requested_output_names, model_version, kwargs)
        self._request_id: str = kwargs.get("request_id", "")
        if None in inputs:
            raise TritonModelException(f"Input tensor for request with id '{self._request_id}' and model name "
                                       f"'{model_name}' should not be empty.")
        self._model_name = model_name
        self._model_version = int(model_version)
        self._inputs = list(inputs)
        self._by_name = {t.name(): t for t in self._inputs}
        self._requested = list(requested_output_names)
        self._parameters: dict[str, Any] = dict(kwargs.get("parameters") or {})
        self._correlation_id: int | str = kwargs.get("correlation_id", 0)
        self._flags: int = kwargs.get("flags", 0)
        correlation_id = self._correlation_id
        if not isinstance(correlation_id, (int, str)) or isinstance(correlation_id, bool):
            raise TritonModelException("Correlation ID must be integer or string")
        self._timeout_us = int(kwargs.get("timeout", 0))  # BLS: microseconds to wait for the (first) answer; 0: no limit
        self._preferred_memory: PreferredMemory | None = kwargs.get("preferred_memory")
        self._trace: InferenceTrace | None = kwargs.get("trace", InferenceTrace())
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._sender: InferenceResponseSender | None = None
        self._cancelled: Callable[[], bool] | None = None  # a received request: whether its client left

    @classmethod
    def _received(cls, inputs: dict[str, Tensor], requested: list[str], parameters: dict[str, Any],
                  sender: InferenceResponseSender | None, fields: tuple[str, int | str, int] = ("", 0, 0),
                  cancelled: Callable[[], bool] | None = None) -> InferenceRequest:
        """A request the worker hands to `execute`: its inputs by name, and the list and dict given, owned from now
        on (the worker made them for this request, so nothing is copied or checked again, and the trace is made
        only when asked for)."""
        request = cls.__new__(cls)
        request._model_name = ""
        request._model_version = -1
        request._by_name = inputs
        request._inputs = list(inputs.values())
        request._requested = requested
        request._parameters = parameters
        request._request_id, request._correlation_id, request._flags = fields
        request._timeout_us = int(parameters.get("timeout", 0))  # the client's (or a BLS caller's), in microseconds
        request._preferred_memory = None
        request._trace = None
        request._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        request._sender = sender
        request._cancelled = cancelled
        if sender is not None:
            sender._cancelled = cancelled
        return request

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def get_input_tensor_by_name(self, name: str) -> Tensor | None:
        return self._by_name.get(name)

    def requested_output_names(self) -> set[str]:
        """The outputs the client asked for; all the model's when it named none (as Triton fills them in)."""
        return set(self._requested)

    def parameters(self) -> str:
        """The request's parameters as JSON, written as Triton writes them (compact, UTF-8)."""
        return json.dumps(self._parameters, separators=(",", ":"), ensure_ascii=False)

    def request_id(self) -> str:
        return self._request_id

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def set_flags(self, flags: int) -> None:
        """The request's sequence flags (TRITONSERVER_REQUEST_FLAG_SEQUENCE_START / _END), for a BLS request."""
        self._flags = int(flags)

    def trace(self) -> InferenceTrace:
        if self._trace is None:  # (a received request's, made once asked for)
            self._trace = InferenceTrace()
        return self._trace

    def set_release_flags(self, flags: int) -> None:
        """How the request is released after `execute`: TRITONSERVER_REQUEST_RELEASE_ALL (the default), or
        TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, Triton's request rescheduling: the request runs again (a model with
        `sequence_batching { iterative_sequence: true }`; in any other the request fails with Triton's words). A
        rescheduled request's entry in a non-decoupled model's returned list must be None."""
        self._release_flags = int(flags)

    def _rescheduled(self) -> bool:
        """Whether the model asked to run this request again (Triton compares the flags with RESCHEDULE exactly)."""
        return self._release_flags == TRITONSERVER_REQUEST_RELEASE_RESCHEDULE

    def timeout(self) -> int:
        return self._timeout_us

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._model_version

    def is_cancelled(self) -> bool:
        """True once the client of this request went away (cancelled, timed out or disconnected)."""
        return self._cancelled is not None and self._cancelled()

    def get_response_sender(self) -> InferenceResponseSender:
        if self._sender is None:
            if self._make_sender is None:
                raise TritonModelException("a response sender is given only to the requests execute() receives")
            self._sender = self._make_sender()
            self._sender._cancelled = self._cancelled
        return self._sender

    def exec(self, decoupled: bool = False) -> Any:
        """Run this request on model `model_name` and wait for its answer: an `InferenceResponse` (which carries the
        error if it failed), or with `decoupled=True` an iterator of the responses of a decoupled model, the last one
        flagged final."""
        return _client().exec(self, decoupled)

    async def async_exec(self, decoupled: bool = False) -> Any:
        """`exec` for `async def execute`: awaiting it lets other requests' `async_exec` run meanwhile. With
        `decoupled=True` it returns once the last response has come, an iterator of them all."""
        return await _client().async_exec(self, decoupled)


def _client() -> Any:
    if _bls_client is None:
        if _finalizing:  # (Triton's words; BLS from initialize() is served here, so the note)
            raise TritonModelException("BLS is only supported during the 'execute' function. (pytriton also serves "
                                       "it in 'initialize'; never in 'finalize')")
        raise TritonModelException("BLS requests (InferenceRequest.exec) can be made only by a model that a pytriton "
                                   "server runs, once initialize() has returned")
    return _bls_client


class _LogLevel(enum.IntEnum):
    """Triton's log levels for `Logger.log` (pb_utils.Logger.LogLevel, also on Logger itself: Logger.WARNING)."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


_LOGGING_LEVEL = {_LogLevel.INFO: logging.INFO, _LogLevel.WARNING: logging.WARNING, _LogLevel.ERROR: logging.ERROR,
                  _LogLevel.VERBOSE: logging.DEBUG}


# The server's logging settings as the worker's model logs follow them (set by the worker; None elsewhere)
_log_gate: ModelLogGate | None = None


def _log(level: _LogLevel, message: str) -> None:
    gate = _log_gate
    shown = None if gate is None else gate.allows(level)
    if shown is None:  # (no settings changed by a client: the worker's logging level decides)
        _logger.log(_LOGGING_LEVEL[level], "%s", message)
    elif shown:
        _logger.handle(_logger.makeRecord(_logger.name, _LOGGING_LEVEL[level], "(model)", 0, "%s", (message,), None))


class Logger:
    """Triton's model logger; lines go to the worker's log under `pytriton.backends.model` (VERBOSE as DEBUG), shown
    as the server's logging settings say once a client changed them (backends/model_log.py)."""

    LogLevel = _LogLevel
    INFO = _LogLevel.INFO
    WARNING = _LogLevel.WARNING
    ERROR = _LogLevel.ERROR
    VERBOSE = _LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: _LogLevel = _LogLevel.INFO) -> None:
        if not isinstance(message, str):
            raise _wrong_kind("log()", "message", "a str", message)
        if not isinstance(level, _LogLevel):  # (a plain int too, as Triton's bindings refuse it)
            raise _wrong_kind("log()", "level", "a pb_utils.Logger.LogLevel", level)
        _log(level, message)

    @staticmethod
    def log_info(message: str) -> None:
        if not isinstance(message, str):
            raise _wrong_kind("log_info()", "message", "a str", message)
        _log(_LogLevel.INFO, message)

    @staticmethod
    def log_warn(message: str) -> None:
        if not isinstance(message, str):
            raise _wrong_kind("log_warn()", "message", "a str", message)
        _log(_LogLevel.WARNING, message)

    @staticmethod
    def log_error(message: str) -> None:
        if not isinstance(message, str):
            raise _wrong_kind("log_error()", "message", "a str", message)
        _log(_LogLevel.ERROR, message)

    @staticmethod
    def log_verbose(message: str) -> None:
        if not isinstance(message, str):
            raise _wrong_kind("log_verbose()", "message", "a str", message)
        _log(_LogLevel.VERBOSE, message)


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Tensor | None:
    return request.get_input_tensor_by_name(name)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Tensor | None:
    return next((t for t in response.output_tensors() if t.name() == name), None)


def _config_entry(model_config: dict[str, Any] | str, kind: str, name: str) -> dict[str, Any] | None:
    config = json.loads(model_config) if isinstance(model_config, str) else model_config
    return next((entry for entry in config.get(kind, []) if entry.get("name") == name), None)


def get_input_config_by_name(model_config: dict[str, Any] | str, name: str) -> dict[str, Any] | None:
    """The input `name` of a model configuration (the JSON `initialize` gets, parsed), or None."""
    return _config_entry(model_config, "input", name)


def get_output_config_by_name(model_config: dict[str, Any] | str, name: str) -> dict[str, Any] | None:
    """The output `name` of a model configuration, or None."""
    return _config_entry(model_config, "output", name)


def using_decoupled_model_transaction_policy(model_config: dict[str, Any] | str) -> bool:
    """True when a model configuration says `model_transaction_policy { decoupled: true }`."""
    config = json.loads(model_config) if isinstance(model_config, str) else model_config
    return bool((config.get("model_transaction_policy") or {}).get("decoupled", False))


def triton_string_to_numpy(triton_type_string: str) -> Any:
    """The numpy type of a configuration datatype ("TYPE_FP32" -> np.float32; "TYPE_STRING" -> np.object_); a
    KeyError for a name not in TRITON_STRING_TO_NUMPY, as in Triton."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def get_model_dir() -> str:
    """The folder of the running model's `model.py` (its version folder), as Triton's stub gives it to
    `auto_complete_config`, `initialize` and the rest of the model."""
    if _model_dir is None:
        raise TritonModelException("get_model_dir() is available only in a repository model that pytriton runs (or "
                                   "auto-completes)")
    return _model_dir


# The ops of the model loading API (the worker protocol's ModelLoading.Op).
_READY, _LOAD, _UNLOAD = 0, 1, 2


def _loading_client(what: str) -> Any:
    if _bls_client is None:
        raise TritonModelException(f"Failed to {what}: the model loading API can be used only by a model that a "
                                   "pytriton server runs, in initialize() and execute()")
    return _bls_client


def _loading_call_error(what: str, message: str) -> TritonModelException:
    """A refusal in Triton's words, naming the calling instance."""
    client = _loading_client(what)
    return TritonModelException(f"Failed to {what}: Failed to process the request for model '{client.caller[2]}', "
                                f"message: {message}")


def _loading_call(what: str, op: int, model_name: str, **fields: Any) -> bool:
    client = _loading_client(what)
    try:
        return bool(client.model_loading(op, model_name, **fields))
    except TritonModelException as exc:
        raise _loading_call_error(what, str(exc)) from None


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Triton's model loading API: load (or reload) `model_name` from the model repository, or with `config` (the
    model configuration in JSON) and `files` ("file:<path in the model folder>" -> content, only with `config`) as
    the repository extension's load takes them. Needs a server in model control mode explicit (and, for `files`,
    --allow-model-upload); returns once the model is loaded; a refusal raises TritonModelException."""
    if files is not None:
        if not isinstance(files, dict):
            raise TritonModelException(f"failed to load model '{model_name}', files should be a dictionary of file "
                                       "paths and file contents")
        for key, value in files.items():
            if not isinstance(key, str) or not isinstance(value, bytes):
                raise TritonModelException(f"failed to load model '{model_name}', files should be a dictionary of "
                                           "file paths (str) and file contents (bytes)")
    _loading_call("load model", _LOAD, str(model_name), config=str(config), files=files)


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Triton's model loading API: stop serving `model_name` (`unload_dependents`: also the models an ensemble loaded
    for it). Returns once it is unloaded; a model unloading itself (or a model that waits for its caller) gets the
    answer once the unload has begun, since the unload waits for the caller's execution to end."""
    _loading_call("unload model", _UNLOAD, str(model_name), unload_dependents=bool(unload_dependents))


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Triton's model loading API: whether `model_name` (version `model_version`, "" for the policy's choice) is
    ready; a model not served is not."""
    version = str(model_version)
    if version:
        number: int | None
        try:
            number = int(version)
        except ValueError:
            number = None
        if number is None or number < 0:
            details = " (details: stol)" if number is None else ""
            raise _loading_call_error(
                "check model readiness", f"failed to get model version from specified version string '{version}'"
                f"{details}, version should be an integral value > 0")
        version = str(number)
    return _loading_call("check model readiness", _READY, str(model_name), model_version=version)


from pytriton.backends.pb_metrics import Metric, MetricFamily, MetricKind  # noqa: E402,F401  (custom metrics)
