"""Triton's `qa/L0_backend_python/argument_validation/test.sh`: `../test_infer_shm_leak.py`, unchanged, with
MODEL_NAME=argument_validation, against `pytriton serve --model-repository` serving the script's own models folder,
on Triton's default ports of a private loopback (tests/_support/triton_qa.py). The model runs Triton's unittest of
pb_utils argument checks (InferenceRequest, InferenceResponse, Tensor, Tensor.from_dlpack, Logger given None or a
value of the wrong kind) inside itself and answers 1 when it passed; its report is in the server's log. The fast
test of the same checks is tests/e2e/test_pb_utils_arguments.py.

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network namespaces.
"""

from __future__ import annotations

import re

import pytest

from tests._support.triton_qa import QaRun, qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_backend_python", "python_models")

IN_MODEL = ["test_infer_request_args", "test_infer_response_args", "test_tensor_args", "test_log_args"]


@pytest.fixture(scope="module")
def run() -> QaRun:
    folder = qa_folder() / "L0_backend_python"
    return run_triton_tests(folder / "test_infer_shm_leak.py", folder / "argument_validation" / "models",
                            env={"MODEL_NAME": "argument_validation"})


def test_the_client_test_passes_as_on_tritonserver(run):
    assert run.ready and run.outcomes == {"TestInferShmLeak::test_shm_leak": "passed"}, run.summary()
    assert run.server_rc == 0, run.summary()


def test_each_case_of_the_suite_inside_the_model_passes(run):
    assert f"Ran {len(IN_MODEL)} tests" in run.server_log and "\nOK\n" in run.server_log, run.summary()
    assert not re.findall(r"(?:ERROR|FAIL): (test_\w+)", run.server_log), run.summary()
