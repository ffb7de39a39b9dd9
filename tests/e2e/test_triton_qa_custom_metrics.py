"""Triton's `qa/L0_backend_python/custom_metrics/test.sh`: `../test_infer_shm_leak.py`, unchanged, with
MODEL_NAME=custom_metrics, against `pytriton serve --model-repository` serving the model it stages, on Triton's
default ports of a private loopback (tests/_support/triton_qa.py). The model runs Triton's custom-metrics unittest
inside itself (MetricFamily / Metric of each kind, duplicates, lifetimes, reading the server's /metrics on port 8002
from inside execute) and answers 1 when it passed; its report is in the server's log.

Every case passes but one, which DIFFERS on purpose: test_histogram_e2e observes three values and at once reads
/metrics from inside the same execute, looking for `_count{...} 3`. On Triton each `observe()` is a round trip to the
server; pytriton gathers a model's updates and sends them in one message before the execution's response (and when
`value()` or a new family needs the server's answer), so a scrape from inside the execution still sees the values
from before it (docs/guide/model-repositories.md, Custom metrics).

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network namespaces.
"""

from __future__ import annotations

import re

import pytest

from tests._support.triton_qa import QaRun, qa_folder, qa_marks, run_triton_tests
from tests.e2e.triton_qa_staging import stage

pytestmark = qa_marks("L0_backend_python", "python_models")

IN_MODEL_CASES = 10
DIFFERS = {
    "test_histogram_e2e": ('test_histogram_e2e_count{example1="histogram_label1",example2="histogram_label2"} 3\' not '
                           "found in"),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> QaRun:
    repository = tmp_path_factory.mktemp("qa-custom-metrics") / "models"
    stage(qa_folder().parent, repository, ["custom_metrics"])
    return run_triton_tests(qa_folder() / "L0_backend_python" / "test_infer_shm_leak.py", repository,
                            env={"MODEL_NAME": "custom_metrics"})


def test_the_client_test_fails_only_for_the_cases_that_differ(run):
    assert run.ready and run.outcomes == {"TestInferShmLeak::test_shm_leak": "failed"}, run.summary()
    assert "python_unittest failed for model custom_metrics" in run.messages["TestInferShmLeak::test_shm_leak"]
    assert run.server_rc == 0, run.summary()


def test_inside_the_model_every_case_passes_but_those_that_differ(run):
    assert f"Ran {IN_MODEL_CASES} tests" in run.server_log, run.summary()
    failed = re.findall(r"(?:ERROR|FAIL): (test_\w+)", run.server_log)
    assert sorted(failed) == sorted(DIFFERS), run.summary()
    for looked_for in DIFFERS.values():
        assert looked_for in run.server_log, run.summary()
