"""Triton's `qa/L0_backend_python/async_execute/concurrency_test.py`, unchanged, against `pytriton serve
--model-repository` serving the models its test.sh stages (async_execute_decouple and async_execute_decouple_bls:
decoupled, `async def execute`), on Triton's default ports of a private loopback (tests/_support/triton_qa.py).
On tritonserver 2.51 with its Python backend every test passes; here test_model_raise_exception passes (in the
file's run, and alone) and the others fail for the reasons DIFFERS gives.

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network namespaces.
"""

from __future__ import annotations

import pytest

from tests._support.triton_qa import SOURCE, QaRun, network_namespaces, qa_folder, run_triton_tests
from tests.e2e.triton_qa_staging import stage

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SOURCE is None, reason="PYTRITON_TRITON_SERVER_SRC names no checkout of Triton's server "
                                              "repository"),
    pytest.mark.skipif(bool(network_namespaces()), reason=network_namespaces() or "-"),
]

MODELS = ["async_execute_decouple", "async_execute_decouple_bls"]
SERVER_LOG = "concurrency_test.server.log"  # (test.sh's name: test_model_raise_exception reads it, as SERVER_LOG)

# Both models answer DUMMY_OUT with shape [batch size] where config.pbtxt declares dims [1] (so [-1, 1]): Triton's
# Python backend sends it as it is, pytriton refuses an output whose shape is not the declared one (the request gets
# that error; docs/guide/model-repositories.md). And Triton runs a decoupled model's `async def execute` in the
# background, taking the instance's next requests at once: the file's 4 requests of 4 s each are answered within its
# 8 s there; here an instance runs one execution at a time (docs/guide/model-repositories.md, "Decoupled models"), so
# the later requests wait.
SHAPE = "output 'DUMMY_OUT' of model 'async_execute_decouple' has shape"
DIFFERS: dict[str, str] = {
    "test_concurrent_execute_single_request": "the output's shape (its 4 sleeps run at once, in one execution)",
    "test_concurrent_execute_single_request_bls": "the output's shape, in the callee: the caller gets no output",
    "test_concurrent_execute_multi_request": "the output's shape, and one execution at a time",
    "test_concurrent_execute_multi_request_bls": "the output's shape, and one execution at a time",
    "test_concurrent_execute_different_duration": "one execution at a time: the 2 s request waits for the 10 s one",
}
# (seen in every run: the requests the failed tests before it left have ended by the time it runs)
PASSES = ["test_model_raise_exception"]


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qa-async-execute") / "models"
    stage(qa_folder().parent, folder, MODELS)
    return folder


def _run(repository, tests=()) -> QaRun:
    return run_triton_tests(qa_folder() / "L0_backend_python" / "async_execute" / "concurrency_test.py", repository,
                            tests=tests, env={"SERVER_LOG": SERVER_LOG}, server_log_name=SERVER_LOG)


@pytest.fixture(scope="module")
def run(repository) -> QaRun:
    return _run(repository)


def test_every_test_of_the_file_is_accounted_for(run):
    assert run.ready, run.summary()
    assert {name.split("::")[1] for name in run.outcomes} == set(DIFFERS) | set(PASSES), run.summary()


@pytest.mark.parametrize("name", PASSES)
def test_passes_as_on_tritonserver(run, name):
    assert run.outcomes[f"ConcurrencyTest::{name}"] == "passed", run.summary()


@pytest.mark.parametrize("name", list(DIFFERS))
def test_differs_for_the_documented_reason(run, name):
    assert run.outcomes[f"ConcurrencyTest::{name}"] == "failed", run.summary()


def test_the_outputs_shape_is_refused_naming_it(run):
    assert SHAPE in run.server_log and "but its config.pbtxt declares [-1, 1]" in run.server_log, run.summary()


def test_an_error_after_the_final_flag_is_logged_as_triton_logs_it(repository):
    """test_model_raise_exception alone (the instance free): the model sends every request's final flag, then raises;
    the log says `ValueError: wait_secs cannot be negative`, as Triton's."""
    alone = _run(repository, ["ConcurrencyTest::test_model_raise_exception"])
    assert alone.outcomes == {"ConcurrencyTest::test_model_raise_exception": "passed"}, alone.summary()
    assert alone.server_rc == 0, alone.summary()
