"""Arguments of the wrong kind given to pb_utils (None where a string, a list or an array is due, a number for a
name, a bare tensor for a list), as Triton's own qa/L0_backend_python/argument_validation gives them: refused with the
exception Triton 2.51 raises (its pybind11 bindings' TypeError, or TritonModelException with its words), so that a
model's own checks that rely on it behave as on Triton. The model (tests/repositories/arguments/arg_check, in Triton's
API) reports what each case gives; TRITON_2_51 is what the real tritonserver 2.51 reported (the slow test below asks
it again where it is installed)."""

from __future__ import annotations

import json

import pytest
import tritonclient.grpc as grpcclient

from tests._support.paths import REPO
from tests._support.real_tritonserver import NOT_INSTALLED, REAL_TRITONSERVER, real_tritonserver
from tests._support.serving import serve

MODELS = REPO / "tests" / "repositories" / "arguments"

# case -> "ok <what it gave>", "TypeError" (its words are pybind11's signature dump: not compared), or
# "<exception>: <words>" (whitespace runs as one space: Triton's from_dlpack message has a run of nine)
NOT_EMPTY = "TritonModelException: Input tensor for request with id '' and model name 'm' should not be empty."
NOT_DLPACK = ("TritonModelException: Provided tensor is not supported. Tensor must be a DLPack capsule or have "
              "`__dlpack__` and `__dlpack_device__` attributes")
TRITON_2_51 = {
    'request inputs [None]': NOT_EMPTY,
    'request inputs [None, tensor]': NOT_EMPTY,
    'request inputs None': 'TypeError',
    'request inputs [1]': 'TypeError',
    'request inputs tuple': 'ok InferenceRequest',
    'request model_name None': 'TypeError',
    'request model_name 5': 'TypeError',
    'request outputs [None]': 'TypeError',
    'request outputs None': 'TypeError',
    'request outputs tuple': "ok ['o']",
    'request correlation_id None': 'TypeError',
    'request correlation_id 1.5': 'TritonModelException: Correlation ID must be integer or string',
    'request correlation_id 5': 'ok 5',
    'request request_id None': 'TypeError',
    'request request_id 5': 'TypeError',
    'request model_version None': 'TypeError',
    "request model_version '1'": 'TypeError',
    'request flags None': 'TypeError',
    'request timeout None': 'TypeError',
    'request preferred_memory None': 'TypeError',
    'request parameters None': "ok '{}'",
    'request empty lists': 'ok set()',
    'response [None]': 'TritonModelException: Output tensor for inference response should not be empty.',
    'response [None, tensor]': 'TritonModelException: Output tensor for inference response should not be empty.',
    'response [1]': 'TypeError',
    'response None': 'TypeError',
    'response tuple': 'ok 1',
    'response error None': 'ok False',
    "response error 'x'": 'TypeError',
    'response nothing': 'ok []',
    'tensor name None': 'TypeError',
    'tensor name 5': 'TypeError',
    "tensor name ''": 'TritonModelException: Tensor name cannot be an empty string.',
    'tensor array None': 'TypeError',
    'tensor array list': 'TypeError',
    "tensor '' None": 'TypeError',
    'from_dlpack None': NOT_DLPACK,
    'from_dlpack 5': NOT_DLPACK,
    "from_dlpack '' None": 'TritonModelException: Tensor name cannot be an empty string.',
    "from_dlpack '' array": 'TritonModelException: Tensor name cannot be an empty string.',
    'from_dlpack name None': 'TypeError',
    'log level None': 'TypeError',
    'log level 1': 'TypeError',
    "log level 'INFO'": 'TypeError',
    'log level WARNING': 'ok NoneType',
    'log None': 'TypeError',
    'log_info None': 'TypeError',
    'log_info 5': 'TypeError',
    'log_warn None': 'TypeError',
    'log_error None': 'TypeError',
    'log_verbose None': 'TypeError',
    'log plain': 'ok NoneType',
}


def report(url: str) -> dict[str, str]:
    with grpcclient.InferenceServerClient(url) as client:
        got = json.loads(client.infer("arg_check", []).as_numpy("REPORT")[0])
    return {case: "TypeError" if said.startswith("TypeError:") else " ".join(said.split())
            for case, said in got.items()}


def test_each_argument_of_the_wrong_kind_is_refused_as_triton_refuses_it():
    with serve("--model-repository", str(MODELS)) as server:
        ours = report(server.grpc_url)
    assert {case: said for case, said in ours.items() if said != TRITON_2_51.get(case)} == {}
    assert ours.keys() == TRITON_2_51.keys()


@pytest.mark.slow
@pytest.mark.skipif(not REAL_TRITONSERVER.exists(), reason=NOT_INSTALLED)
def test_the_real_tritonserver_refuses_the_same(tmp_path):
    with real_tritonserver(MODELS, tmp_path) as url:
        assert report(url) == TRITON_2_51
