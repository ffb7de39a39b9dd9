"""Every public name of Triton's `triton_python_backend_utils` is in ours, of the same kind, with Triton's values, and
the names that were missing behave as Triton's do.

Where the list comes from (Triton 2.51, python_backend branch r24.10):
- src/resources/triton_python_backend_utils.py: its module-level names;
- src/pb_stub.cc: the names the stub copies from its C++ module `c_python_backend_utils` into that module at start
  (`py::setattr(python_backend_utils, ...)`: TritonError, TritonModelException, Tensor, InferenceRequest,
  InferenceResponse, Logger, PreferredMemory, TRITONSERVER_MEMORY_GPU/CPU, MetricFamily, load_model, unload_model,
  is_model_ready; and `get_model_dir`, which it defines on the module before auto_complete_config and initialize),
  and the methods and enums `PYBIND11_EMBEDDED_MODULE(c_python_backend_utils, ...)` binds on them
  (the response sender is reached through `get_response_sender()`, metrics through `MetricFamily.Metric()`).
Checked against the real tritonserver 2.51 of the nvidia-pytriton 0.7.0 wheel: `dir(pb_utils)` in a model's
initialize gives exactly these module names, and the enum values below (Tensor.triton_dtype() raises TypeError there).
"""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pytriton.backends import pb_utils
from pytriton.repository import load_model

# ---- triton_python_backend_utils.py (r24.10) -------------------------------------------------------------------
PY_FUNCTIONS = [
    "serialize_byte_tensor", "deserialize_bytes_tensor", "get_input_tensor_by_name", "get_output_tensor_by_name",
    "get_input_config_by_name", "get_output_config_by_name", "using_decoupled_model_transaction_policy",
    "triton_to_numpy_type", "numpy_to_triton_type", "triton_string_to_numpy",
]
PY_CLASSES = {"ModelConfig": ["as_dict", "set_max_batch_size", "set_dynamic_batching", "add_input", "add_output",
                              "set_model_transaction_policy"]}
PY_CONSTANTS = {
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START": 1,
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END": 2,
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL": 1,
    "TRITONSERVER_REQUEST_RELEASE_ALL": 1,
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE": 2,
    "TRITON_STRING_TO_NUMPY": {
        "TYPE_BOOL": bool, "TYPE_UINT8": np.uint8, "TYPE_UINT16": np.uint16, "TYPE_UINT32": np.uint32,
        "TYPE_UINT64": np.uint64, "TYPE_INT8": np.int8, "TYPE_INT16": np.int16, "TYPE_INT32": np.int32,
        "TYPE_INT64": np.int64, "TYPE_FP16": np.float16, "TYPE_FP32": np.float32, "TYPE_FP64": np.float64,
        "TYPE_STRING": np.object_,
    },
}

# ---- what pb_stub.cc (r24.10) sets on the module, and the methods it binds ----------------------------------------
STUB_CLASSES = {
    "TritonError": ["code", "message"],
    "Tensor": ["name", "as_numpy", "triton_dtype", "to_dlpack", "is_cpu", "shape", "from_dlpack", "__dlpack__",
               "__dlpack_device__"],
    "InferenceRequest": ["inputs", "request_id", "correlation_id", "flags", "set_flags", "timeout", "parameters",
                         "trace", "exec", "async_exec", "requested_output_names", "get_response_sender",
                         "is_cancelled", "set_release_flags"],
    "InferenceResponse": ["output_tensors", "has_error", "error"],
    "Logger": ["log", "log_info", "log_warn", "log_error", "log_verbose"],
    "PreferredMemory": [],
    "MetricFamily": ["Metric"],
}
STUB_FUNCTIONS = ["load_model", "unload_model", "is_model_ready", "get_model_dir"]
STUB_EXCEPTIONS = ["TritonModelException"]
# enum values: TRITONSERVER_Error_Code (tritonserver.h), PreferredMemory::MemoryType, LogLevel, MetricKind (pb_utils.h)
ERROR_CODES = {"UNKNOWN": 0, "INTERNAL": 1, "NOT_FOUND": 2, "INVALID_ARG": 3, "UNAVAILABLE": 4, "UNSUPPORTED": 5,
               "ALREADY_EXISTS": 6, "CANCELLED": 7}
STUB_CONSTANTS = {"TRITONSERVER_MEMORY_GPU": 0, "TRITONSERVER_MEMORY_CPU": 1}
LOG_LEVELS = {"INFO": 0, "WARNING": 1, "ERROR": 2, "VERBOSE": 3}
METRIC_KINDS = {"COUNTER": 0, "GAUGE": 1, "HISTOGRAM": 2}
# the objects reached through the classes above
SENDER_METHODS = ["send", "is_cancelled"]
METRIC_METHODS = ["increment", "set", "observe", "value"]
TRACE_METHODS = ["get_context"]


def test_every_public_name_is_there_with_its_kind():
    missing = [name for name in [*PY_FUNCTIONS, *PY_CLASSES, *PY_CONSTANTS, *STUB_CLASSES, *STUB_FUNCTIONS,
                                 *STUB_EXCEPTIONS, *STUB_CONSTANTS] if not hasattr(pb_utils, name)]
    assert missing == []
    for name in [*PY_FUNCTIONS, *STUB_FUNCTIONS]:
        assert callable(getattr(pb_utils, name)) and not inspect.isclass(getattr(pb_utils, name)), name
    for name in [*PY_CLASSES, *STUB_CLASSES]:
        assert inspect.isclass(getattr(pb_utils, name)), name
    for name in STUB_EXCEPTIONS:
        assert issubclass(getattr(pb_utils, name), Exception)
    for name, value in {**PY_CONSTANTS, **STUB_CONSTANTS}.items():
        assert getattr(pb_utils, name) == value, name


def test_every_bound_method_is_there():
    absent = [f"{cls}.{method}" for cls, methods in {**PY_CLASSES, **STUB_CLASSES}.items() for method in methods
              if not callable(getattr(getattr(pb_utils, cls), method, None))]
    absent += [f"InferenceResponseSender.{m}" for m in SENDER_METHODS
               if not callable(getattr(pb_utils.InferenceResponseSender, m, None))]
    absent += [f"Metric.{m}" for m in METRIC_METHODS if not callable(getattr(pb_utils.Metric, m, None))]
    absent += [f"InferenceTrace.{m}" for m in TRACE_METHODS if not callable(getattr(pb_utils.InferenceTrace, m, None))]
    assert absent == []


def test_enum_values_are_triton_s():
    for name, value in ERROR_CODES.items():
        assert getattr(pb_utils.TritonError, name) == value, name
    for name, value in LOG_LEVELS.items():
        assert getattr(pb_utils.Logger.LogLevel, name) == value, name
        assert getattr(pb_utils.Logger, name) == value, name  # (pybind's export_values puts them on Logger too)
    for name, value in METRIC_KINDS.items():
        assert getattr(pb_utils.MetricFamily, name) == value, name


def test_triton_string_to_numpy_is_the_table():
    assert pb_utils.triton_string_to_numpy("TYPE_BOOL") is bool
    assert pb_utils.triton_string_to_numpy("TYPE_STRING") is np.object_
    with pytest.raises(KeyError):  # Triton's: a plain lookup in TRITON_STRING_TO_NUMPY
        pb_utils.triton_string_to_numpy("TYPE_BF16")


def test_tensor_triton_dtype_and_dlpack_protocol():
    tensor = pb_utils.Tensor("X", np.arange(6, dtype=np.float32).reshape(2, 3))
    assert tensor.triton_dtype() == 11  # TRITONSERVER_TYPE_FP32
    assert pb_utils.Tensor("S", np.array([b"a"], dtype=np.object_)).triton_dtype() == 13  # BYTES
    assert tensor.__dlpack_device__() == (1, 0)  # kDLCPU, device 0
    np.testing.assert_array_equal(np.from_dlpack(tensor), tensor.as_numpy())  # a Tensor is a DLPack producer


def test_a_read_only_input_goes_through_dlpack_as_triton_inputs_do():
    """Inputs are read-only views on shared memory; `to_dlpack()` (a legacy capsule, which cannot say read-only:
    torch and cupy may write into it) exports a copy, and `from_dlpack` takes such a capsule, as Triton's do."""
    shared = np.arange(4, dtype=np.float32)
    shared.flags.writeable = False
    tensor = pb_utils.Tensor._wrap("X", shared)
    capsule = tensor.to_dlpack()
    assert type(capsule).__name__ == "PyCapsule"
    assert pb_utils.Tensor.from_dlpack("Y", capsule).as_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="can be taken once"):
        pb_utils.Tensor.from_dlpack("Y", capsule)
    np.testing.assert_array_equal(np.from_dlpack(tensor), shared)  # (told read-only: no copy)
    assert np.from_dlpack(_LegacyConsumer(tensor)).tolist() == [0.0, 1.0, 2.0, 3.0]  # (not told: a copy)
    assert pb_utils.Tensor.from_dlpack("Z", shared).as_numpy() is shared


class _LegacyConsumer:
    """What an older DLPack consumer asks of a producer: `__dlpack__()` without `max_version`."""

    def __init__(self, tensor: pb_utils.Tensor):
        self.tensor = tensor

    def __dlpack__(self, *args, **kwargs):
        return self.tensor.__dlpack__()

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_a_request_built_with_a_string_for_a_list_is_refused():
    with pytest.raises(TypeError, match="requested_output_names must be a list of str, got str"):
        pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names="Y")
    assert pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=["Y"]).requested_output_names() \
        == {"Y"}  # (a set, as Triton 2.51 gives it)


def test_inference_request_flags_trace_preferred_memory_and_release_flags():
    memory = pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0)
    request = pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=["Y"],
                                        preferred_memory=memory, trace=pb_utils.InferenceTrace())
    assert request.flags() == 0
    request.set_flags(pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START)
    assert request.flags() == pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
    assert request.trace().get_context() is None  # Triton: None when the request is not traced
    request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL)
    assert not request._rescheduled()
    request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)  # (the request runs again: e2e tests)
    assert request._rescheduled()


def test_logger_log_takes_a_level(caplog):
    with caplog.at_level("DEBUG", logger="pytriton.backends.model"):
        pb_utils.Logger.log("warned", pb_utils.Logger.WARNING)
        pb_utils.Logger.log("errored", level=pb_utils.Logger.LogLevel.ERROR)
        pb_utils.Logger.log("plain")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "warned"), ("ERROR", "errored"), ("INFO", "plain")]


def test_get_model_dir_outside_a_model_says_why(monkeypatch):
    monkeypatch.setattr(pb_utils, "_model_dir", None)  # (a test that built a model in this process set it)
    with pytest.raises(pb_utils.TritonModelException, match="get_model_dir"):
        pb_utils.get_model_dir()


def test_model_loading_api_outside_a_server_says_why():
    for what, call in (("load model", lambda: pb_utils.load_model("m")),
                       ("unload model", lambda: pb_utils.unload_model("m")),
                       ("check model readiness", lambda: pb_utils.is_model_ready("m"))):
        with pytest.raises(pb_utils.TritonModelException, match=f"Failed to {what}: the model loading API can be "
                                                                "used only by a model that a pytriton server runs"):
            call()


AUTO_COMPLETE_MODEL = textwrap.dedent('''
    import os

    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        @staticmethod
        def auto_complete_config(auto_complete_model_config):
            # as Triton's QA models do: the datatype names from the module's own table
            assert "TYPE_FP32" in pb_utils.TRITON_STRING_TO_NUMPY
            # Triton's stub: the version folder that holds model.py
            assert pb_utils.get_model_dir() == os.path.dirname(os.path.abspath(__file__)), pb_utils.get_model_dir()
            for name in sorted(pb_utils.TRITON_STRING_TO_NUMPY):
                if name == "TYPE_FP32":
                    auto_complete_model_config.add_input({"name": "X", "data_type": name, "dims": [4]})
                    auto_complete_model_config.add_output({"name": "Y", "data_type": name, "dims": [4]})
            return auto_complete_model_config

        def execute(self, requests):
            return []
''')


def test_auto_complete_config_that_reads_the_type_table_loads(tmp_path: Path):
    model_dir = tmp_path / "typed"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text(AUTO_COMPLETE_MODEL)
    model = load_model(str(model_dir))
    assert [(t.name, t.datatype, t.shape) for t in model.config.inputs] == [("X", "FP32", (4,))]
    assert [t.name for t in model.config.outputs] == ["Y"]
