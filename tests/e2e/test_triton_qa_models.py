"""Triton's own Python-backend QA models (the server repository's `qa/python_models`), staged as Triton's QA scripts
stage them (tests/e2e/triton_qa_staging.py), each loaded through the repository extension of `pytriton serve
--model-repository` (mode explicit, tritonclient HTTP): it is served, or refused for the reason Triton 2.51 refuses
it. EXPECTED says, per model, what Triton 2.51 does (checked with the tritonserver 2.51 of the nvidia-pytriton 0.7.0
wheel on the same staged folder, r24.10 of the server repository) and where pytriton differs, and why.

A model that needs what this machine lacks (a package such as torch or cupy, a GPU) is skipped for its environment,
not counted as a refusal: `needs` names what its refusal then says.

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (or of its
`qa/python_models` and `qa/L0_backend_python` folders):

    git -C server archive r24.10 qa/python_models qa/L0_backend_python | tar -x -C /tmp/triton-server-src
    PYTRITON_TRITON_SERVER_SRC=/tmp/triton-server-src scripts/test-slow tests/e2e/test_triton_qa_models.py
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests._support.serving import serve
from tests.e2e.triton_qa_staging import STAGED, stage, unstaged_folders

CHECKOUT = os.environ.get("PYTRITON_TRITON_SERVER_SRC")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHECKOUT, reason="PYTRITON_TRITON_SERVER_SRC names no checkout of Triton's server "
                                            "repository (its qa/python_models and qa/L0_backend_python)"),
]


@dataclass(frozen=True)
class Expected:
    """`served`, or refused: `why` (Triton 2.51's reason), `words` (in our refusal), `triton` (in Triton's)."""

    served: bool
    why: str = ""
    words: str = ""
    triton: str = ""
    needs: tuple[str, ...] = ()  # what our refusal says when this machine lacks what the model needs
    differs: str = ""  # where pytriton's outcome is not Triton's: what Triton does, and why we differ


def served(*needs: str) -> Expected:
    return Expected(True, needs=needs)


def refused(why: str, words: str, triton: str) -> Expected:
    return Expected(False, why, words, triton)


TORCH = "No module named 'torch'"
CUPY = "No module named 'cupy'"
NO_GPU = "but no GPUs are available"
NAME = "the model name must match its directory"
EXPECTED: dict[str, Expected] = {
    "identity_fp32": served(),
    "identity_bf16": served(TORCH),
    "identity_uint8": served(),
    "identity_uint8_nobatch": served(),
    "identity_uint32": served(),
    "identity_bool": served(),
    "default_model_name": served(),
    "pytorch_fp32_fp32": served(TORCH),
    "delayed_model": served(),
    "init_args": served(),  # initialize() checks every arg, model_repository included (TRITON_DIR, below)
    "optional": served(),
    "non_contiguous": served(),
    "string": served(),
    "string_fixed": served(),
    "dlpack_identity": served(),
    "add_sub_gpu": served(NO_GPU),
    "multi_file": served(),  # model.py imports `file1` and `from . import file2`
    "model_env": served(),  # initialize() wants MY_ENV=MY_ENV in the server's environment (the script exports it)
    "init_exit": refused("its process kills itself in initialize()", "worker was killed by SIGKILL before it was ready",
                         "Stub process 'init_exit_0_0' is not healthy."),
    "async_execute_decouple": served(),
    "async_execute_decouple_bls": served(),
    "response_sender": served(),
    "response_sender_decoupled": served(),
    "response_sender_async": served(),
    "response_sender_decoupled_async": served(),
    "response_sender_batching": served(),
    "response_sender_decoupled_batching": served(),
    "response_sender_async_batching": served(),
    "response_sender_decoupled_async_batching": served(),
    "response_sender_complete_final": served(),
    "response_sender_error": served(),
    "python_version": served("No module named 'tensorflow'"),  # (the env suite gives it a conda pack with it)
    "execute_cancel": served(),
    "dlpack_add_sub": served(TORCH),
    "bls_request_rescheduling": served(),  # (it asks for rescheduling in execute(), not when loaded)
    "request_rescheduling_addsub": served(),
    "iterative_sequence": served(),
    "wrong_return_type": served(),
    "dlpack_io_identity_1": served(TORCH),
    "dlpack_io_identity_2": served(TORCH),
    "dlpack_io_identity_3": served(TORCH),
    "ensemble_io": served("depends on 'dlpack_io_identity_"),  # (its steps need torch)
    "dlpack_io_identity_decoupled": served(TORCH),
    "dlpack_empty_output": served(TORCH),
    "variable_gpu_output": served(TORCH, NO_GPU),
    "add_sub": served(),
    "simple_identity_fp32": served(),  # an ensemble over identity_fp32
    "bls": served(TORCH),
    "bls_async": served(TORCH),
    "bls_memory": served(),
    "bls_memory_async": served(),
    "dlpack_square": served(TORCH),
    "identity_fp32_timeout": served(),
    "bls_init_error": Expected(True, differs=(
        "Triton refuses it: 'BLS is only supported during the 'execute' function.' (its initialize() makes a BLS "
        "call); here BLS may be called from initialize(), and the call it makes is never read, so the load succeeds")),
    "bls_finalize_error": served(),
    "bls_model_loading": served(),
    "bls_parameters": served(),
    "error_code": served(),
    "execute_error": served(),
    "execute_grpc_error": served(),
    "execute_return_error": served(),
    "wrong_model": served(),  # (its outputs are wrong when it runs; it loads)
    "init_error": refused("initialize() raises", "NameError: name 'lorem_ipsum' is not defined",
                          "NameError: name 'lorem_ipsum' is not defined"),
    "fini_error": served(),
    "auto_complete_error": refused("auto_complete_config() raises", "NameError: name 'undefined_variable' is not "
                                   "defined", "NameError: name 'undefined_variable' is not defined"),
    "identity_fp32_logging": served(),
    "custom_metrics": served("No module named 'requests'"),
    "ensemble": served(),
    "add_sub_1": served(),
    "add_sub_2": served(),
    "auto_complete": served(),
    "bls_onnx_warmup": served(TORCH),
    "bls_simple": served(),
    "bls_undefined": served(),
    "busy_op": served(),
    "cuda_memory_consumer": served("No module named 'cuda'", NO_GPU),
    "dlpack_test": served(CUPY, TORCH),
    "execute_delayed_model": refused("config.pbtxt names the model 'simple'", NAME,
                                     "unexpected directory name 'execute_delayed_model' for model 'simple', "
                                     "directory name must equal model name"),
    "ground_truth": served(),
    "model_init_del": served(),  # it imports util.py from the model's folder; MODEL_LOG_DIR as its script exports
    "sequence_py": served(),
    "string_identity": served(),
    "resnet50": refused("config.pbtxt names the model 'resnet50_python'", NAME,
                        "unexpected directory name 'resnet50' for model 'resnet50_python', directory name must equal "
                        "model name"),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server in mode explicit over the staged repository, which lies where init_args looks for it:
    `$TRITON_DIR/qa/L0_backend_python/models`; with the variables the QA scripts export (MY_ENV, MODEL_LOG_DIR)."""
    assert CHECKOUT is not None
    root = tmp_path_factory.mktemp("triton_qa")
    models = root / "qa" / "L0_backend_python" / "models"
    stage(Path(CHECKOUT), models)
    env = {"TRITON_DIR": str(root), "MY_ENV": "MY_ENV", "MODEL_LOG_DIR": str(root)}
    with serve("--model-repository", str(models), "--model-control-mode", "explicit", env=env) as s:
        yield s


def test_every_qa_python_model_is_staged_and_expected():
    """Each folder of qa/python_models is staged (or said to be no model of its own), and each staged model has its
    expected outcome written down: a checkout with new models fails here until they are."""
    assert CHECKOUT is not None
    assert unstaged_folders(Path(CHECKOUT)) == []
    assert sorted(item.name for item in STAGED) == sorted(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_qa_model_is_served_or_refused_as_triton_does(server, name):
    expected = EXPECTED[name]
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=300.0)
    try:
        client.load_model(name)
        error = None
    except InferenceServerException as exc:
        error = str(exc)
    try:
        if error is not None:
            lacking = [need for need in expected.needs if need in error]
            if lacking:
                pytest.skip(f"environment: {lacking[0]}")
        if expected.served:
            assert error is None, f"{name}: Triton 2.51 serves it; refused here: {error}"
            assert client.is_model_ready(name)
        else:
            why = expected.why or expected.differs
            assert error is not None, f"{name}: Triton 2.51 refuses it ({why}); served here"
            assert expected.words in error, error
    finally:
        if error is None:
            client.unload_model(name, unload_dependents=True)
        client.close()
