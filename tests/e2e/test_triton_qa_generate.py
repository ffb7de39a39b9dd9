"""Triton's `qa/L0_http/generate_endpoint_test.py` (the generate extension: `/generate` and `/generate_stream`, their
JSON and server-sent events, errors), unchanged, against `pytriton serve --model-repository` serving the suite's
`generate_models` (its decoupled `mock_llm`), run as its test.sh runs it (`python generate_endpoint_test.py`: 17
tests).

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_http and qa/common, and this machine allows network namespaces (tests/_support/triton_qa.py).
"""

from __future__ import annotations

import shutil


from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_http")

TESTS = ["test_0_dimension_output", "test_close_connection_during_streaming", "test_complex_schema",
         "test_duplicate_inputs", "test_generate", "test_generate_stream", "test_generate_stream_response_error",
         "test_generate_with_all_inputs", "test_invalid_input_types", "test_many_response", "test_missing_inputs",
         "test_one_response", "test_parameters", "test_race_condition", "test_request_id", "test_streaming",
         "test_zero_response"]


def test_every_test_passes_as_on_tritonserver(tmp_path):
    suite = qa_folder() / "L0_http"
    repository = tmp_path / "generate_models"
    shutil.copytree(suite / "generate_models", repository)
    run = run_triton_tests(suite / "generate_endpoint_test.py", repository, runner="unittest")
    assert run.ready and run.server_rc == 0, run.summary()
    assert run.outcomes == {f"GenerateEndpointTest::{name}": "passed" for name in TESTS}, run.summary()
