"""Triton's `qa/L0_backend_python/model_control` (its `model_control_test.py`, unchanged) against `pytriton serve
--model-control-mode=explicit` serving the models its test.sh stages: a Python model and an ensemble over it, loaded
and unloaded five times. Its one test passes, as on tritonserver 2.51.

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network and mount namespaces.
"""

from __future__ import annotations

import pytest

from tests._support.triton_qa import QaRun, qa_folder, qa_marks, run_triton_tests
from tests.e2e.triton_qa_staging import stage

pytestmark = qa_marks("L0_backend_python", "python_models")

MODELS = ["identity_fp32", "simple_identity_fp32"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> QaRun:
    repository = tmp_path_factory.mktemp("qa-model-control") / "models"
    stage(qa_folder().parent, repository, MODELS)
    # (test.sh's --log-verbose=1 is not an option of pytriton serve, and changes nothing the test looks at)
    return run_triton_tests(qa_folder() / "L0_backend_python" / "model_control" / "model_control_test.py", repository,
                            server_args=["--model-control-mode=explicit"])


def test_the_reload_test_passes_as_on_tritonserver(run):
    assert run.ready, run.summary()
    assert run.outcomes == {"ExplicitModelTest::test_model_reload": "passed"}, run.summary()


def test_the_server_stopped_cleanly_and_left_no_shared_memory(run):
    assert (run.server_rc, run.shm_left) == (0, []), run.summary()
