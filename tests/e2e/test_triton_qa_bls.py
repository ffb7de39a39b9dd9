"""Triton's `qa/L0_backend_python/bls/test.sh`, its client files unchanged, against `pytriton serve
--model-repository` serving the models it stages (tests/e2e/triton_qa_staging.py), on Triton's default ports of a
private loopback (tests/_support/triton_qa.py):

- `../test_infer_shm_leak.py` with MODEL_NAME set to each model that runs Triton's BLS unittest inside itself
  (`bls_memory`, `bls_memory_async`: 256 MiB and 4 x 50 MiB through an identity model), under BLS_KIND
  `non_decoupled` and `decoupled`: the model answers 1 when its suite passed (its report is in the server's log);
- `bls_parameters_test.py` against `bls_parameters` (request parameters handed on through nested BLS calls);
- `bls_finalize_error` (a BLS call from `finalize()`): the server's log says Triton's words;
- `bls_init_error` (a BLS call from `initialize()`): Triton refuses the model, pytriton serves it (DIFFERS).

What this machine cannot run (NEEDS): `bls` and `bls_async` import torch and most of their cases need a GPU (and the
script's `Request timeout: 11000000000` check is of `bls`'s test_timeout); `bls_model_loading` loads
`onnx_int32_int32_int32` from Triton's data folder (an ONNX model: pytriton serves Python models only). The models
only those use are not staged: `dlpack_add_sub`, `dlpack_square` (torch), `square_int32` (python_backend's example),
`onnx_nobatch_sequence_int32`, `libtorch_gpu`, `libtorch_cpu` (Triton's data folder).

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network namespaces.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests._support.serving import serve
from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests
from tests.e2e.triton_qa_staging import stage

pytestmark = [*qa_marks("L0_backend_python", "python_models"), pytest.mark.timeout(300)]

# The script's first server, less the models that need what NEEDS says.
MODELS = ["bls_memory", "bls_memory_async", "add_sub", "execute_error", "identity_fp32", "dlpack_identity",
          "identity_fp32_timeout"]
KINDS = ["non_decoupled", "decoupled"]
MEMORY_MODELS = ["bls_memory", "bls_memory_async"]
BLS_ONLY_IN_EXECUTE = "BLS is only supported during the 'execute' function."

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _qa(name: str) -> Path:
    return qa_folder() / "L0_backend_python" / name


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    models = tmp_path_factory.mktemp("qa-bls") / "models"
    stage(qa_folder().parent, models, MODELS)
    return models


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("model", MEMORY_MODELS)
def test_the_bls_memory_suites_pass_inside_the_model(repository, kind, model):
    """One server per run, as the script's (each run sends 256 MiB and 4 x 50 MiB through BLS: about 40 s)."""
    run = run_triton_tests(_qa("test_infer_shm_leak.py"), repository, env={"MODEL_NAME": model, "BLS_KIND": kind})
    assert run.ready and run.outcomes == {"TestInferShmLeak::test_shm_leak": "passed"}, run.summary()
    assert run.server_rc == 0, run.summary()
    if model == "bls_memory":  # (a unittest suite; bls_memory_async's coroutine answers without a report)
        assert "Ran 1 test" in run.server_log and "\nOK\n" in run.server_log, run.summary()


def test_bls_parameters_test_passes(tmp_path):
    repository = tmp_path / "params_models"
    stage(qa_folder().parent, repository, ["bls_parameters"])
    run = run_triton_tests(_qa("bls/bls_parameters_test.py"), repository)
    assert run.outcomes == {"TestBlsParameters::test_bls_parameters": "passed"}, run.summary()
    assert run.server_rc == 0, run.summary()


def test_a_bls_call_from_finalize_is_refused_in_tritons_words(tmp_path):
    stage(qa_folder().parent, tmp_path / "models", ["bls_finalize_error"])
    with serve("--model-repository", str(tmp_path / "models")) as server:
        pass
    assert BLS_ONLY_IN_EXECUTE in server.log


# DIFFERS: Triton refuses bls_init_error (its stub serves BLS in execute only: the server fails to start, its log
# says BLS_ONLY_IN_EXECUTE); pytriton serves BLS from initialize() too, so that a model may call another while it
# starts (docs/guide/model-repositories.md, BLS).
def test_a_bls_call_from_initialize_is_served_unlike_triton(tmp_path):
    stage(qa_folder().parent, tmp_path / "models", ["bls_init_error"])
    with serve("--model-repository", str(tmp_path / "models")) as server:
        assert "model 'bls_init_error' version 1 ready" in server.log
    assert BLS_ONLY_IN_EXECUTE not in server.log



@pytest.mark.skipif(HAS_TORCH, reason="this machine has torch: bls and bls_async are checked by hand")
@pytest.mark.parametrize("model", ["bls", "bls_async"])
def test_needs_torch(tmp_path, model):
    """NEEDS: `bls` and `bls_async` import torch (and most of their cases need a GPU)."""
    stage(qa_folder().parent, tmp_path / "models", [model])
    run = run_triton_tests(_qa("test_infer_shm_leak.py"), tmp_path / "models", env={"MODEL_NAME": model})
    # (the server fails to start: `ready` may still read True when its output ended before it was reaped)
    assert run.server_rc != 0 and "No module named 'torch'" in run.server_log, run.summary()
