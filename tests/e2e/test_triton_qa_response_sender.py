"""Triton's `qa/L0_backend_python/response_sender/response_sender_test.py` and
`response_sender_complete_final_test.py`, unchanged, against `pytriton serve --model-repository` serving the models
their test.sh stages (the response_sender model as decoupled or not, sync or `async def execute`, batching or not;
then response_sender_complete_final alone), on Triton's default ports of a private loopback
(tests/_support/triton_qa.py). Every test passes here, as on tritonserver 2.51 with its Python backend on the same
staged folders, but the two the file itself skips (`@unittest.skip`: Triton's model unload would hang).

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network namespaces.
"""

from __future__ import annotations

import pytest

from tests._support.triton_qa import QaRun, qa_folder, qa_marks, run_triton_tests
from tests.e2e.triton_qa_staging import stage

pytestmark = qa_marks("L0_backend_python", "python_models")

# qa/L0_backend_python/response_sender/test.sh's first server
MODELS = ["response_sender", "response_sender_decoupled", "response_sender_async", "response_sender_decoupled_async",
          "response_sender_batching", "response_sender_decoupled_batching", "response_sender_async_batching",
          "response_sender_decoupled_async_batching"]

PASSES = [
    "test_decoupled_zero_response_pre_return", "test_decoupled_zero_response_post_return",
    "test_decoupled_one_response_pre_return", "test_decoupled_one_response_post_return",
    "test_decoupled_two_response_pre_return", "test_decoupled_two_response_post_return",
    "test_decoupled_response_pre_and_post_return", "test_decoupled_multiple_requests",
    "test_decoupled_one_response_on_return", "test_decoupled_one_response_pre_and_on_return",
    "test_decoupled_one_response_on_and_post_return",
    "test_non_decoupled_one_response_on_return", "test_non_decoupled_one_response_pre_return",
    "test_non_decoupled_one_response_post_return", "test_non_decoupled_multiple_requests",
    "test_non_decoupled_zero_response_pre_return", "test_non_decoupled_two_response_pre_return",
    "test_non_decoupled_one_response_pre_and_on_return", "test_non_decoupled_one_response_on_and_post_return",
]

SKIPPED_BY_THE_FILE = ["test_non_decoupled_zero_response_post_return", "test_non_decoupled_two_response_post_return"]

# test.sh's second server, whose log the test reads (SERVER_LOG, a name in its working folder)
COMPLETE_FINAL_LOG = "response_sender_complete_final_test.server.log"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> QaRun:
    repository = tmp_path_factory.mktemp("qa-response-sender") / "models"
    stage(qa_folder().parent, repository, MODELS)
    return run_triton_tests(qa_folder() / "L0_backend_python" / "response_sender" / "response_sender_test.py",
                            repository)


@pytest.fixture(scope="module")
def complete_final_run(tmp_path_factory) -> QaRun:
    repository = tmp_path_factory.mktemp("qa-response-sender-complete-final") / "models"
    stage(qa_folder().parent, repository, ["response_sender_complete_final"])
    test_file = qa_folder() / "L0_backend_python" / "response_sender" / "response_sender_complete_final_test.py"
    return run_triton_tests(test_file, repository, env={"SERVER_LOG": COMPLETE_FINAL_LOG},
                            server_log_name=COMPLETE_FINAL_LOG)


def test_every_test_of_the_file_is_accounted_for(run):
    assert run.ready, run.summary()
    names = {name.split("::")[1] for name in run.outcomes}
    assert names == set(PASSES) | set(SKIPPED_BY_THE_FILE), run.summary()


@pytest.mark.parametrize("name", PASSES)
def test_passes_as_on_tritonserver(run, name):
    assert run.outcomes.get(f"ResponseSenderTest::{name}") == "passed", run.summary()


@pytest.mark.parametrize("name", SKIPPED_BY_THE_FILE)
def test_skipped_by_the_file_itself(run, name):
    assert run.outcomes.get(f"ResponseSenderTest::{name}") == "skipped", run.summary()


def test_the_server_stopped_cleanly(run):
    assert run.server_rc == 0, run.summary()


def test_a_send_after_the_final_flag_is_refused_as_on_tritonserver(complete_final_run):
    assert complete_final_run.outcomes == {"ResponseSenderTest::test_respond_after_complete_final": "passed"}, \
        complete_final_run.summary()
    assert complete_final_run.server_rc == 0, complete_final_run.summary()
