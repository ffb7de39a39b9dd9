"""NVIDIA's module tree of the in-process API: every public name a program imports through NVIDIA's paths resolves,
and is the very object the top-level package exports (one set of classes, re-exported).

The tree below is core's `python/tritonserver` at r24.10 (Triton 2.51): its `_api` modules and `_c` bindings (the
names of `_c/triton_bindings.pyi` and `tritonserver_pybind.cc`), plus `_api/_memorybuffer.py`, which replaced
`_allocators.py` in r25.02 and later. Each module lists the public names it binds at module level (classes it defines
and the aliases it imports under public names).
"""

from __future__ import annotations

import importlib

import pytest

import tritonserver

ERRORS = ["TritonError", "UnknownError", "InternalError", "NotFoundError", "InvalidArgumentError",
          "UnavailableError", "UnsupportedError", "AlreadyExistsError"]  # fmt: skip

ENUMS = ["TRITONSERVER_DataType", "TRITONSERVER_MemoryType", "TRITONSERVER_ParameterType",
         "TRITONSERVER_InstanceGroupKind", "TRITONSERVER_LogLevel", "TRITONSERVER_LogFormat",
         "TRITONSERVER_MetricFormat", "TRITONSERVER_InferenceTraceLevel", "TRITONSERVER_InferenceTraceActivity",
         "TRITONSERVER_RequestFlag", "TRITONSERVER_RequestReleaseFlag", "TRITONSERVER_ResponseCompleteFlag",
         "TRITONSERVER_ModelControlMode", "TRITONSERVER_RateLimitMode", "TRITONSERVER_ModelBatchFlag",
         "TRITONSERVER_ModelIndexFlag", "TRITONSERVER_ModelTxnPropertyFlag", "TRITONSERVER_MetricKind"]  # fmt: skip

BINDING_FUNCTIONS = ["TRITONSERVER_DataTypeString", "TRITONSERVER_StringToDataType", "TRITONSERVER_DataTypeByteSize",
                     "TRITONSERVER_MemoryTypeString", "TRITONSERVER_ParameterTypeString",
                     "TRITONSERVER_InstanceGroupKindString", "TRITONSERVER_InferenceTraceLevelString",
                     "TRITONSERVER_InferenceTraceActivityString", "TRITONSERVER_LogIsEnabled",
                     "TRITONSERVER_LogMessage", "api_version"]  # fmt: skip

# The enum values pybind11's export_values() binds at module level of triton_bindings (the .pyi's list).
EXPORTED_VALUES = {
    "ALL": "TRITONSERVER_RequestReleaseFlag", "FINAL": "TRITONSERVER_ResponseCompleteFlag",
    "SEQUENCE_START": "TRITONSERVER_RequestFlag", "SEQUENCE_END": "TRITONSERVER_RequestFlag",
    "FIRST_DIM": "TRITONSERVER_ModelBatchFlag", "UNKNOWN": "TRITONSERVER_ModelBatchFlag",
    "READY": "TRITONSERVER_ModelIndexFlag", "ONE_TO_ONE": "TRITONSERVER_ModelTxnPropertyFlag",
    "DECOUPLED": "TRITONSERVER_ModelTxnPropertyFlag", "DISABLED": "TRITONSERVER_InferenceTraceLevel",
    "MIN": "TRITONSERVER_InferenceTraceLevel", "MAX": "TRITONSERVER_InferenceTraceLevel",
    "TIMESTAMPS": "TRITONSERVER_InferenceTraceLevel", "TENSORS": "TRITONSERVER_InferenceTraceLevel",
    "REQUEST_START": "TRITONSERVER_InferenceTraceActivity", "QUEUE_START": "TRITONSERVER_InferenceTraceActivity",
    "COMPUTE_START": "TRITONSERVER_InferenceTraceActivity", "COMPUTE_INPUT_END": "TRITONSERVER_InferenceTraceActivity",
    "COMPUTE_OUTPUT_START": "TRITONSERVER_InferenceTraceActivity",
    "COMPUTE_END": "TRITONSERVER_InferenceTraceActivity", "REQUEST_END": "TRITONSERVER_InferenceTraceActivity",
    "TENSOR_QUEUE_INPUT": "TRITONSERVER_InferenceTraceActivity",
    "TENSOR_BACKEND_INPUT": "TRITONSERVER_InferenceTraceActivity",
    "TENSOR_BACKEND_OUTPUT": "TRITONSERVER_InferenceTraceActivity",
}  # fmt: skip

NVIDIA_TREE: dict[str, list[str]] = {
    "tritonserver": [
        "MemoryAllocator", "MemoryBuffer", "MemoryType", "default_memory_allocators", "DLDeviceType", "Model",
        "ModelBatchFlag", "ModelTxnPropertyFlag", "InferenceRequest", "InferenceResponse", "InstanceGroupKind",
        "LogFormat", "Metric", "MetricFamily", "MetricFormat", "MetricKind", "ModelControlMode", "Options",
        "RateLimiterResource", "RateLimitMode", "Server", "DataType", "Tensor", *ERRORS,
    ],
    "tritonserver._api": [],
    "tritonserver._api._allocators": [
        "MemoryBuffer", "MemoryAllocator", "CPUAllocator", "ResponseAllocator", "MemoryType",
        "default_memory_allocators", "LogLevel", "LogMessage",
    ],
    "tritonserver._api._memorybuffer": ["MemoryBuffer", "MemoryType", "DeviceOrMemoryType", "DLDeviceType"],
    "tritonserver._api._datautils": [
        "CustomKeyErrorDict", "DLPackObject", "parse_device_or_memory_type", "DeviceOrMemoryType", "DataType",
        "MemoryType", "InvalidArgumentError", "UnsupportedError",
    ],
    "tritonserver._api._dlpack": [
        "DLDeviceType", "DLDevice", "DLDataTypeCode", "DLDataType", "DLTensor", "DLManagedTensor",
    ],
    "tritonserver._api._logging": ["LogLevel", "LogMessage"],
    "tritonserver._api._model": [
        "Model", "InferenceRequest", "ResponseIterator", "AsyncResponseIterator", "InvalidArgumentError",
        "ModelBatchFlag", "ModelTxnPropertyFlag",
    ],
    "tritonserver._api._request": [
        "InferenceRequest", "Tensor", "DataType", "MemoryType", "DLDeviceType", "MemoryAllocator",
        "InvalidArgumentError", "DeviceOrMemoryType",
    ],
    "tritonserver._api._response": [
        "InferenceResponse", "ResponseIterator", "AsyncResponseIterator", "Tensor", "LogLevel", "LogMessage",
        "InferenceRequest", "MemoryBuffer", "MemoryType", "DLDeviceType",
    ],
    "tritonserver._api._server": [
        "Server", "Options", "ModelDictionary", "RateLimiterResource", "ModelLoadDeviceLimit", "Metric",
        "MetricFamily", "Model", "LogFormat", "LogLevel", "MetricFormat", "MetricKind", "ModelControlMode",
        "RateLimitMode", "InstanceGroupKind", "InvalidArgumentError",
    ],
    "tritonserver._api._tensor": [
        "Tensor", "DataType", "MemoryType", "MemoryBuffer", "DLDeviceType", "UnsupportedError",
        "DeviceOrMemoryType",
    ],
    "tritonserver._c": [*ERRORS, *ENUMS, *BINDING_FUNCTIONS, *EXPORTED_VALUES],
    "tritonserver._c.triton_bindings": [*ERRORS, *ENUMS, *BINDING_FUNCTIONS, *EXPORTED_VALUES],
}

# NVIDIA's names this package does not have, each with the reason (docs/guide/in-process.md, "Module layout").
# A name listed here must really be missing: once it is built, it leaves this list.
NOT_PROVIDED = {
    "ResponseAllocator": "wraps TRITONSERVER_ResponseAllocator, a C object this server does not have",
    "CustomKeyErrorDict": "an internal helper of NVIDIA's request class",
    "DLPackObject": "an internal helper of NVIDIA's tensor class",
    "DLDataTypeCode": "an internal ctypes type of NVIDIA's DLPack code",
}

# Where a name that is not exported at the top level must come from: the same object wherever it is imported.
HOMES = {"LogLevel": "tritonserver._api._logging", "LogMessage": "tritonserver._api._logging",
         "ModelDictionary": "tritonserver._api._server", "ModelLoadDeviceLimit": "tritonserver._api._server",
         "CPUAllocator": "tritonserver._api._allocators", "ResponseIterator": "tritonserver._api._response",
         "AsyncResponseIterator": "tritonserver._api._response",
         "parse_device_or_memory_type": "tritonserver._api._datautils",
         "DeviceOrMemoryType": "tritonserver._api._memorybuffer"}  # fmt: skip
for _name in ("DLDevice", "DLDataType", "DLTensor", "DLManagedTensor"):
    HOMES[_name] = "tritonserver._api._dlpack"

CASES = [(module, name) for module, names in NVIDIA_TREE.items() for name in names if name not in NOT_PROVIDED]


def _reference(name: str) -> object:
    """The one object `name` must be: the top-level export, else the `_c` binding, else its home module's."""
    if name in NVIDIA_TREE["tritonserver"]:
        return getattr(tritonserver, name)
    if name in NVIDIA_TREE["tritonserver._c"]:
        return getattr(importlib.import_module("tritonserver._c"), name)
    return getattr(importlib.import_module(HOMES[name]), name)


@pytest.mark.parametrize(("module", "name"), CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_every_public_name_resolves_through_nvidias_path_as_the_same_object(module, name):
    imported = importlib.import_module(module)
    assert getattr(imported, name) is _reference(name)


@pytest.mark.parametrize("module", sorted(NVIDIA_TREE))
def test_attribute_paths_resolve_after_import_tritonserver(module):
    # `import tritonserver; tritonserver._api._response.InferenceResponse`: no import statement for the submodule
    target = tritonserver
    for part in module.split(".")[1:]:
        target = getattr(target, part)
    assert target is importlib.import_module(module)


def test_not_provided_names_are_really_missing():
    for module, names in NVIDIA_TREE.items():
        imported = importlib.import_module(module)
        for name in names:
            if name in NOT_PROVIDED:
                assert not hasattr(imported, name), f"{module}.{name} exists: remove it from NOT_PROVIDED"


def test_the_c_enums_are_the_top_level_enums_with_pybinds_exported_values():
    from tritonserver._c import triton_bindings

    assert triton_bindings.TRITONSERVER_DataType is tritonserver.DataType
    assert triton_bindings.TRITONSERVER_MemoryType is tritonserver.MemoryType
    assert triton_bindings.TRITONSERVER_ModelControlMode is tritonserver.ModelControlMode
    for value, enum_name in EXPORTED_VALUES.items():
        assert getattr(triton_bindings, value) is getattr(triton_bindings, enum_name)[value]
    level = triton_bindings.TRITONSERVER_InferenceTraceLevel
    activity = triton_bindings.TRITONSERVER_InferenceTraceActivity
    assert [(m.name, int(m)) for m in level] == [("DISABLED", 0), ("MIN", 1), ("MAX", 2), ("TIMESTAMPS", 4),
                                                 ("TENSORS", 8)]
    assert int(activity.REQUEST_START) == 0 and int(activity.TENSOR_BACKEND_OUTPUT) == 9


def test_the_c_helper_functions_answer_as_tritons_c_api():
    from tritonserver import _c

    assert _c.TRITONSERVER_DataTypeString(_c.TRITONSERVER_DataType.FP32) == "FP32"
    assert _c.TRITONSERVER_DataTypeString(_c.TRITONSERVER_DataType.INVALID) == "<invalid>"
    assert _c.TRITONSERVER_StringToDataType("BYTES") is _c.TRITONSERVER_DataType.BYTES
    assert _c.TRITONSERVER_StringToDataType("float") is _c.TRITONSERVER_DataType.INVALID
    assert _c.TRITONSERVER_DataTypeByteSize(_c.TRITONSERVER_DataType.BF16) == 2
    assert _c.TRITONSERVER_DataTypeByteSize(_c.TRITONSERVER_DataType.BYTES) == 0
    assert _c.TRITONSERVER_MemoryTypeString(_c.TRITONSERVER_MemoryType.CPU_PINNED) == "CPU_PINNED"
    assert _c.TRITONSERVER_ParameterTypeString(_c.TRITONSERVER_ParameterType.DOUBLE) == "DOUBLE"
    assert _c.TRITONSERVER_InstanceGroupKindString(_c.TRITONSERVER_InstanceGroupKind.MODEL) == "MODEL"
    assert _c.TRITONSERVER_InferenceTraceLevelString(_c.TRITONSERVER_InferenceTraceLevel.TENSORS) == "TENSORS"
    assert _c.TRITONSERVER_InferenceTraceActivityString(_c.QUEUE_START) == "QUEUE_START"
    assert _c.api_version() == (1, 34)
    with pytest.raises(TypeError):
        _c.TRITONSERVER_DataTypeString(11)  # pybind11 enums take their own type only


def test_log_message_goes_to_the_server_log(caplog):
    from tritonserver._api._logging import LogLevel, LogMessage

    with caplog.at_level("INFO", logger="pytriton"):
        LogMessage(LogLevel.WARN, "from the application")
    record = [r for r in caplog.records if r.getMessage() == "from the application"]
    assert record and record[0].levelname == "WARNING"
    assert record[0].pathname == __file__  # the caller's file and line, as Triton's LogMessage gives them
