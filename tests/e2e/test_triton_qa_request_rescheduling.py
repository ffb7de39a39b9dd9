"""Triton's `qa/L0_backend_python/request_rescheduling/test.sh`, its client files unchanged, against `pytriton serve
--model-repository ... --model-control-mode explicit --load-model '*'` serving the models it stages
(tests/e2e/triton_qa_staging.py), on Triton's default ports of a private loopback (tests/_support/triton_qa.py):
`../test_infer_shm_leak.py` with MODEL_NAME=bls_request_rescheduling (the model runs Triton's rescheduling unittest
through BLS inside itself, reloading its callees with the model loading API, and answers 1 when it passed), then
`grpc_endpoint_test.py` (a rescheduled decoupled model over a gRPC stream, and a rescheduled non-decoupled one). The
script runs both against one server; here each gets its own (each reloads the models it uses first).

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network namespaces.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests
from tests.e2e.triton_qa_staging import stage

pytestmark = qa_marks("L0_backend_python", "python_models")

MODELS = ["bls_request_rescheduling", "request_rescheduling_addsub", "iterative_sequence", "wrong_return_type"]
SERVER_ARGS = ["--model-control-mode", "explicit", "--load-model", "*"]


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    models = tmp_path_factory.mktemp("qa-rescheduling") / "models"
    stage(qa_folder().parent, models, MODELS)
    return models


def test_the_rescheduling_suite_passes_inside_the_model(repository):
    run = run_triton_tests(qa_folder() / "L0_backend_python" / "test_infer_shm_leak.py", repository,
                           server_args=SERVER_ARGS, env={"MODEL_NAME": "bls_request_rescheduling"})
    assert run.ready and run.outcomes == {"TestInferShmLeak::test_shm_leak": "passed"}, run.summary()
    assert "Ran 3 tests" in run.server_log and "\nOK\n" in run.server_log, run.summary()
    assert run.server_rc == 0, run.summary()


def test_grpc_endpoint_test_passes(repository):
    run = run_triton_tests(qa_folder() / "L0_backend_python" / "request_rescheduling" / "grpc_endpoint_test.py",
                           repository, server_args=SERVER_ARGS)
    assert run.outcomes == {"GrpcEndpointTest::test_grpc_decoupled": "passed",
                            "GrpcEndpointTest::test_grpc_non_decoupled": "passed"}, run.summary()
    assert run.server_rc == 0, run.summary()
