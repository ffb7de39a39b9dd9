"""The enums and exceptions of the in-process API: Triton's names, values and error mapping."""

from __future__ import annotations

import pytest

from pytriton.exceptions import ServerError, Status
from pytriton.tritonserver import _enums, _errors


def test_enum_values_are_tritonserver_h_values():
    assert [(m.name, m.value) for m in _enums.DataType] == [
        ("INVALID", 0), ("BOOL", 1), ("UINT8", 2), ("UINT16", 3), ("UINT32", 4), ("UINT64", 5),
        ("INT8", 6), ("INT16", 7), ("INT32", 8), ("INT64", 9), ("FP16", 10), ("FP32", 11),
        ("FP64", 12), ("BYTES", 13), ("BF16", 14),
    ]  # fmt: skip
    assert [(m.name, m.value) for m in _enums.MemoryType] == [("CPU", 0), ("CPU_PINNED", 1), ("GPU", 2)]
    assert [(m.name, m.value) for m in _enums.ModelControlMode] == [("NONE", 0), ("POLL", 1), ("EXPLICIT", 2)]
    assert _enums.RateLimitMode.EXEC_COUNT == 1
    assert _enums.LogFormat.ISO8601 == 1
    assert _enums.MetricFormat.PROMETHEUS == 0
    assert _enums.InstanceGroupKind.MODEL == 3
    assert _enums.ModelBatchFlag.FIRST_DIM == 2
    assert _enums.ModelTxnPropertyFlag.DECOUPLED == 2
    assert _enums.RequestFlag.SEQUENCE_START | _enums.RequestFlag.SEQUENCE_END == 3
    assert _enums.ResponseCompleteFlag.FINAL == 1
    assert _enums.DLDeviceType.kDLCUDA == 2


def test_enums_print_as_tritons_pybind_enums():
    assert repr(_enums.DataType.BYTES) == "<TRITONSERVER_DataType.BYTES: 13>"
    assert repr(_enums.ModelBatchFlag.FIRST_DIM) == "<TRITONSERVER_ModelBatchFlag.FIRST_DIM: 2>"
    assert str(_enums.MemoryType.GPU) == "TRITONSERVER_MemoryType.GPU"
    assert f"{_enums.MemoryType.CPU}" == "TRITONSERVER_MemoryType.CPU"
    assert _enums.MemoryType.GPU.name == "GPU" and _enums.MemoryType.GPU.value == 2
    assert _enums.TRITONSERVER_DataType is _enums.DataType


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (Status.UNKNOWN, _errors.UnknownError),
        (Status.INTERNAL, _errors.InternalError),
        (Status.NOT_FOUND, _errors.NotFoundError),
        (Status.INVALID_ARG, _errors.InvalidArgumentError),
        (Status.UNAVAILABLE, _errors.UnavailableError),
        (Status.UNSUPPORTED, _errors.UnsupportedError),
        (Status.ALREADY_EXISTS, _errors.AlreadyExistsError),
        (Status.CANCELLED, _errors.CancelledError),
    ],
)
def test_from_status_picks_the_subclass_and_keeps_the_message(status, cls):
    error = _errors.from_status(status, "Request for unknown model: 'x' is not found")
    assert type(error) is cls
    assert isinstance(error, _errors.TritonError)
    assert str(error) == "Request for unknown model: 'x' is not found"


def test_from_server_error():
    error = _errors.from_server_error(ServerError(Status.INVALID_ARG, "bad shape"))
    assert type(error) is _errors.InvalidArgumentError and str(error) == "bad shape"
    with pytest.raises(_errors.TritonError, match="bad shape"):
        raise error
