"""REPORT = JSON {case: what it gives}: each case builds a pb_utils object or logs with an argument of the wrong kind
(None, a number for a string, a bare value for a list), as Triton's qa/L0_backend_python/argument_validation does;
"ok" or the exception's type and words. Written in Triton's own API, so that tritonserver 2.51 runs it too."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

ARRAY = np.asarray([1, 2], dtype=np.int32)


def _tensors():
    return [pb_utils.Tensor("INPUT0", ARRAY)]


def _request(**changed):
    fields = {"inputs": _tensors(), "model_name": "m", "requested_output_names": ["o"], **changed}
    return pb_utils.InferenceRequest(**fields)


CASES = {
    "request inputs [None]": lambda: _request(inputs=[None]),
    "request inputs [None, tensor]": lambda: _request(inputs=[None] + _tensors()),
    "request inputs None": lambda: _request(inputs=None),
    "request inputs [1]": lambda: _request(inputs=[1]),
    "request inputs tuple": lambda: _request(inputs=tuple(_tensors())),
    "request model_name None": lambda: _request(model_name=None),
    "request model_name 5": lambda: _request(model_name=5),
    "request outputs [None]": lambda: _request(requested_output_names=[None]),
    "request outputs None": lambda: _request(requested_output_names=None),
    "request outputs tuple": lambda: sorted(_request(requested_output_names=("o",)).requested_output_names()),
    "request correlation_id None": lambda: _request(correlation_id=None),
    "request correlation_id 1.5": lambda: _request(correlation_id=1.5),
    "request correlation_id 5": lambda: _request(correlation_id=5).correlation_id(),
    "request request_id None": lambda: _request(request_id=None),
    "request request_id 5": lambda: _request(request_id=5),
    "request model_version None": lambda: _request(model_version=None),
    "request model_version '1'": lambda: _request(model_version="1"),
    "request flags None": lambda: _request(flags=None),
    "request timeout None": lambda: _request(timeout=None),
    "request preferred_memory None": lambda: _request(preferred_memory=None),
    "request parameters None": lambda: _request(parameters=None).parameters(),
    "request empty lists": lambda: _request(inputs=[], requested_output_names=[]).requested_output_names(),
    "response [None]": lambda: pb_utils.InferenceResponse(output_tensors=[None]),
    "response [None, tensor]": lambda: pb_utils.InferenceResponse(output_tensors=[None] + _tensors()),
    "response [1]": lambda: pb_utils.InferenceResponse(output_tensors=[1]),
    "response None": lambda: pb_utils.InferenceResponse(output_tensors=None),
    "response tuple": lambda: len(pb_utils.InferenceResponse(output_tensors=tuple(_tensors())).output_tensors()),
    "response error None": lambda: pb_utils.InferenceResponse(_tensors(), error=None).has_error(),
    "response error 'x'": lambda: pb_utils.InferenceResponse(_tensors(), error="x"),
    "response nothing": lambda: pb_utils.InferenceResponse().output_tensors(),
    "tensor name None": lambda: pb_utils.Tensor(None, ARRAY),
    "tensor name 5": lambda: pb_utils.Tensor(5, ARRAY),
    "tensor name ''": lambda: pb_utils.Tensor("", ARRAY),
    "tensor array None": lambda: pb_utils.Tensor("O", None),
    "tensor array list": lambda: pb_utils.Tensor("O", [1, 2]),
    "tensor '' None": lambda: pb_utils.Tensor("", None),
    "from_dlpack None": lambda: pb_utils.Tensor.from_dlpack("O", None),
    "from_dlpack 5": lambda: pb_utils.Tensor.from_dlpack("O", 5),
    "from_dlpack '' None": lambda: pb_utils.Tensor.from_dlpack("", None),
    "from_dlpack '' array": lambda: pb_utils.Tensor.from_dlpack("", ARRAY),
    "from_dlpack name None": lambda: pb_utils.Tensor.from_dlpack(None, ARRAY),
    "log level None": lambda: pb_utils.Logger.log("x", None),
    "log level 1": lambda: pb_utils.Logger.log("x", 1),
    "log level 'INFO'": lambda: pb_utils.Logger.log("x", "INFO"),
    "log level WARNING": lambda: pb_utils.Logger.log("x", pb_utils.Logger.WARNING),
    "log None": lambda: pb_utils.Logger.log(None),
    "log_info None": lambda: pb_utils.Logger.log_info(None),
    "log_info 5": lambda: pb_utils.Logger.log_info(5),
    "log_warn None": lambda: pb_utils.Logger.log_warn(None),
    "log_error None": lambda: pb_utils.Logger.log_error(None),
    "log_verbose None": lambda: pb_utils.Logger.log_verbose(None),
    "log plain": lambda: pb_utils.Logger.log("Level unspecified"),
}


def _run(case):
    try:
        got = case()
    except Exception as exc:  # noqa: BLE001 - what the call raised is the answer
        return f"{type(exc).__name__}: {exc}"
    return "ok " + (repr(got) if isinstance(got, (bool, int, str, list, set)) else type(got).__name__)


class TritonPythonModel:
    def execute(self, requests):
        report = json.dumps({name: _run(case) for name, case in CASES.items()})
        return [pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", np.array([report.encode()], dtype=np.object_))])
                for _ in requests]
