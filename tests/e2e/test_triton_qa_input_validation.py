"""Triton's `qa/L0_input_validation/input_validation_test.py` (its `InputValTest`: required and optional inputs of
Python-backend models, missing or empty), unchanged, against `pytriton serve --model-repository` serving the suite's
`models` folder, as its test.sh runs it first. (Its `InputShapeTest` serves a PyTorch-backend model and its
`input_byte_size_test` is a C++ program: neither applies to pytriton.)

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_input_validation and qa/common, and this machine allows network namespaces (tests/_support/triton_qa.py).
"""

from __future__ import annotations

import shutil


from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_input_validation")

TESTS = ["test_input_validation_all_optional", "test_input_validation_optional", "test_input_validation_optional_empty",
         "test_input_validation_required_empty", "test_input_validation_required_missing"]


def test_input_val_test_passes_as_on_tritonserver(tmp_path):
    suite = qa_folder() / "L0_input_validation"
    repository = tmp_path / "models"
    shutil.copytree(suite / "models", repository)
    run = run_triton_tests(suite / "input_validation_test.py", repository, tests=["InputValTest"])
    assert run.ready and run.server_rc == 0, run.summary()
    assert run.outcomes == {f"InputValTest::{name}": "passed" for name in TESTS}, run.summary()
