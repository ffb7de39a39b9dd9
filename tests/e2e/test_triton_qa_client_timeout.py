"""Triton's `qa/L0_client_timeout/client_infer_timeout_test.py` (a client's timeout on a model that takes 3 s:
gRPC sync, async and stream, HTTP sync and async), unchanged, against `pytriton serve --model-repository` serving the
suite's `models` (`backend: "identity"` with `execute_delay_ms`, served unchanged by the Python-based backend
tests/_support/triton_qa_backends/identity). Its non-infer timeout test needs Triton's
TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC test hook, and its C++ client programs are not Python: both left out.

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_client_timeout and qa/common, and this machine allows network namespaces (tests/_support/triton_qa.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_client_timeout")

BACKENDS = ("--backend-directory", str(Path(__file__).resolve().parent.parent / "_support" / "triton_qa_backends"))
TESTS = ["test_grpc_async_infer", "test_grpc_infer", "test_grpc_stream_infer", "test_http_async_infer",
         "test_http_infer"]


def test_client_infer_timeouts_as_on_tritonserver(tmp_path):
    models = tmp_path / "models"
    shutil.copytree(qa_folder() / "L0_client_timeout" / "models", models)
    (models / "custom_identity_int32" / "1").mkdir(exist_ok=True)  # (the QA image makes it)
    run = run_triton_tests(qa_folder() / "L0_client_timeout" / "client_infer_timeout_test.py", models,
                           server_args=BACKENDS, runner="unittest")
    assert run.ready and run.server_rc == 0, run.summary()
    assert run.outcomes == {f"ClientInferTimeoutTest::{name}": "passed" for name in TESTS}, run.summary()
