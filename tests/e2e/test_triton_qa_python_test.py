"""Triton's `qa/L0_backend_python/python_test.py`, unchanged, against `pytriton serve --model-repository` serving the
models its test.sh stages (tests/e2e/triton_qa_staging.py), on Triton's default ports of a private loopback
(tests/_support/triton_qa.py). Each of its tests passes here, or fails for the reason EXPECTED gives.

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder; tests/e2e/test_triton_qa_models.py says how to make one) and this machine allows network namespaces.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests._support.triton_qa import QaRun, qa_folder, qa_marks, run_triton_tests
from tests.e2e.triton_qa_staging import stage

pytestmark = qa_marks("L0_backend_python")

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_CUDA_PYTHON = importlib.util.find_spec("cuda") is not None

# qa/L0_backend_python/test.sh's first server: these models (init_exit, multi_file, model_env and add_sub_gpu get
# servers of their own there, with no client test).
MODELS = ["identity_fp32", "identity_uint8", "identity_uint8_nobatch", "identity_uint32", "identity_bool",
          "default_model_name", "delayed_model", "init_args", "optional", "non_contiguous", "string", "string_fixed",
          "dlpack_identity"] + (["identity_bf16", "pytorch_fp32_fp32"] if HAS_TORCH else [])

PASSES = ["test_async_infer", "test_bool", "test_init_args", "test_non_contiguous", "test_optional_input",
          "test_string", "test_unicode"]

# Tests this machine cannot run, and why.
NEEDS: dict[str, str] = {
    "test_bf16": "torch in the model, and a tritonclient that takes np.float32 for BF16 (newer ones want ml_dtypes)",
    "test_infer_pytorch": "torch in the model",
    "test_dlpack_tensor_error": "a GPU and cuda-python (CUDA shared memory)",
    "test_gpu_tensor_error": "a GPU and cuda-python (CUDA shared memory)",
}

# Tests that fail on purpose, with what they look for and what pytriton does instead.
DIFFERS: dict[str, tuple[str, str]] = {
    "test_growth_error": (
        # Triton grows one shared-memory pool per model (--backend-config=python,shm-growth-byte-size) and fails a
        # request it cannot fit with this message. pytriton has no such pool: a 1 GiB request is past the HTTP
        # input limit (--http-max-input-size, 64 MiB by default) and gets 413 before any memory is taken.
        "Failed to increase the shared memory pool size",
        "exceeds the maximum allowed input size",
    ),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> QaRun:
    scratch = tmp_path_factory.mktemp("qa-python-test")
    # init_args checks that its repository is $TRITON_DIR/qa/L0_backend_python/models.
    repository = scratch / "qa" / "L0_backend_python" / "models"
    stage(qa_folder().parent, repository, MODELS)
    return run_triton_tests(qa_folder() / "L0_backend_python" / "python_test.py", repository,
                            env={"TRITON_DIR": str(scratch)})


def test_every_test_of_the_file_is_accounted_for(run):
    assert run.ready, run.summary()
    names = {name.split("::")[1] for name in run.outcomes}
    assert names == set(PASSES) | set(NEEDS) | set(DIFFERS), run.summary()


@pytest.mark.parametrize("name", PASSES)
def test_passes_as_on_tritonserver(run, name):
    assert run.outcomes.get(f"PythonTest::{name}") == "passed", run.summary()


@pytest.mark.parametrize("name", list(DIFFERS))
def test_differs_for_the_documented_reason(run, name):
    looked_for, ours = DIFFERS[name]
    message = run.messages[f"PythonTest::{name}"]
    assert run.outcomes[f"PythonTest::{name}"] == "failed" and looked_for in message and ours in message, \
        run.summary()


@pytest.mark.parametrize("name", list(NEEDS))
def test_needs_what_this_machine_lacks(run, name):
    if (name in ("test_bf16", "test_infer_pytorch") and HAS_TORCH) or HAS_CUDA_PYTHON:
        pytest.skip("this machine has what the test needs: its outcome is checked by hand")
    assert run.outcomes[f"PythonTest::{name}"] == "failed", run.summary()


def test_the_server_stopped_cleanly(run):
    assert run.server_rc == 0, run.summary()


def test_file_exists():
    assert Path(qa_folder() / "L0_backend_python" / "python_test.py").is_file()
