"""Triton's `qa/L0_backend_python/ensemble` (its `ensemble_test.py`, unchanged) against `pytriton serve` serving the
models its test.sh stages: `ensemble` over two copies of `add_sub`. `test_ensemble` passes, as on tritonserver 2.51;
`test_ensemble_gpu` needs what this machine lacks (its ensemble's other step is a PyTorch-backend model of Triton's
data, on a GPU; pytriton serves only Python models), so it is not staged and its request finds no model.

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network and mount namespaces.
"""

from __future__ import annotations

import pytest

from tests._support.triton_qa import QaRun, qa_folder, qa_marks, run_triton_tests
from tests.e2e.triton_qa_staging import stage

pytestmark = qa_marks("L0_backend_python", "python_models")

MODELS = ["ensemble", "add_sub_1", "add_sub_2"]  # (and ensemble_gpu over libtorch_float32_float32_float32: not here)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> QaRun:
    repository = tmp_path_factory.mktemp("qa-ensemble") / "models"
    stage(qa_folder().parent, repository, MODELS)
    return run_triton_tests(qa_folder() / "L0_backend_python" / "ensemble" / "ensemble_test.py", repository)


def test_every_test_of_the_file_is_accounted_for(run):
    assert run.ready, run.summary()
    assert set(run.outcomes) == {"EnsembleTest::test_ensemble", "EnsembleTest::test_ensemble_gpu"}, run.summary()


def test_the_ensemble_test_passes_as_on_tritonserver(run):
    assert run.outcomes["EnsembleTest::test_ensemble"] == "passed", run.summary()


def test_the_gpu_ensemble_needs_a_pytorch_model_and_a_gpu(run):
    assert run.outcomes["EnsembleTest::test_ensemble_gpu"] == "failed", run.summary()
    assert "'ensemble_gpu' is not found" in run.messages["EnsembleTest::test_ensemble_gpu"], run.summary()


def test_the_server_stopped_cleanly_and_left_no_shared_memory(run):
    assert (run.server_rc, run.shm_left) == (0, []), run.summary()
