"""Triton's `qa/L0_backend_python/io/io_test.py`, unchanged, against `pytriton serve --model-repository`, as its
test.sh runs it: each subtest against a server of its own models, on Triton's default ports of a private loopback
(tests/_support/triton_qa.py). The subtests this machine can run pass (as on tritonserver 2.51 with its Python
backend); NEEDS says what the others need.

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network namespaces.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests
from tests.e2e.triton_qa_staging import stage

pytestmark = qa_marks("L0_backend_python", "python_models")

HAS_TORCH = importlib.util.find_spec("torch") is not None

# test.sh's last server: add_sub, and dlpack_io_identity_decoupled (torch) for test_requested_output_decoupled
PASSES = {"test_requested_output_default": ["add_sub"]}

# Subtests this machine cannot run, and why: their models import torch (and move tensors to a GPU when the request
# asks); the ensemble's decoupled trial also needs decoupled ensemble steps, which pytriton refuses
# (docs/guide/model-repositories.md, "Ensembles").
NEEDS: dict[str, str] = {
    "test_ensemble_io": "torch and a GPU in dlpack_io_identity (both trials: default, decoupled)",
    "test_empty_gpu_output": "torch and a GPU in dlpack_empty_output",
    "test_variable_gpu_output": "torch and a GPU in variable_gpu_output",
    "test_requested_output_decoupled": "torch (and a GPU for half its random inputs) in dlpack_io_identity_decoupled",
}


def test_every_test_of_the_file_is_accounted_for():
    text = (qa_folder() / "L0_backend_python" / "io" / "io_test.py").read_text()
    names = {line.split("def ")[1].split("(")[0] for line in text.splitlines() if line.startswith("    def test_")}
    assert names == set(PASSES) | set(NEEDS)


@pytest.mark.parametrize("name", list(PASSES))
def test_passes_as_on_tritonserver(tmp_path, name):
    repository = tmp_path / "models"
    stage(qa_folder().parent, repository, PASSES[name])
    run = run_triton_tests(qa_folder() / "L0_backend_python" / "io" / "io_test.py", repository,
                           tests=[f"IOTest::{name}"])
    assert run.outcomes == {f"IOTest::{name}": "passed"}, run.summary()
    assert run.server_rc == 0, run.summary()
