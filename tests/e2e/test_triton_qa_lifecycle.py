"""Triton's `qa/L0_backend_python/lifecycle` (its test.sh and `lifecycle_test.py`, unchanged) against `pytriton serve`:
the client test file run five times on the first server's models, as test.sh runs it (tests/_support/triton_qa.py:
Triton's default ports of a private loopback, a /dev/shm of its own), then the script's three other servers, whose
model fails in `initialize()`, `finalize()` or `auto_complete_config()`, each checked for the line test.sh greps in
the server's log. Each test of the file passes, as on tritonserver 2.51 with its Python backend.

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network and mount namespaces.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests._support.paths import REPO
from tests._support.ports import LOCAL_PORTS
from tests._support.serving import serve
from tests._support.triton_qa import QaRun, qa_folder, qa_marks, run_triton_tests
from tests.e2e.triton_qa_staging import stage

# (the module fixture runs the file five times, about 35 s each)
pytestmark = [*qa_marks("L0_backend_python", "python_models"), pytest.mark.timeout(600)]

# test.sh's first server
MODELS = ["error_code", "execute_cancel", "execute_error", "execute_grpc_error", "execute_return_error", "wrong_model"]
RUNS = 5  # test.sh runs the file five times on the same server

PASSES = ["test_batch_error", "test_error_code", "test_execute_cancel", "test_infer_pymodel_error",
          "test_triton_grpc_error_cancel", "test_triton_grpc_error_error_off", "test_triton_grpc_error_error_on",
          "test_triton_grpc_error_multithreaded"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> QaRun:
    repository = tmp_path_factory.mktemp("qa-lifecycle") / "models"
    stage(qa_folder().parent, repository, MODELS)
    # test_execute_cancel reads the server's log as test.sh writes it: lifecycle_server.log in the client's folder
    # (test.sh's --log-verbose=1 is not an option of pytriton serve: the lines the test reads are INFO ones)
    return run_triton_tests(qa_folder() / "L0_backend_python" / "lifecycle" / "lifecycle_test.py", repository,
                            server_log_name="lifecycle_server.log", runs=RUNS)


def test_every_test_of_the_file_is_accounted_for(run):
    assert run.ready, run.summary()
    assert {name.split("::")[1] for name in run.outcomes} == set(PASSES), run.summary()


@pytest.mark.parametrize("name", PASSES)
def test_passes_as_on_tritonserver_in_each_run(run, name):
    assert run.outcomes.get(f"LifecycleTest::{name}") == "passed", run.summary()


def test_the_server_stopped_cleanly_and_left_no_shared_memory(run):
    # (test.sh compares /dev/shm's pages before and after; the run's /dev/shm is its own)
    assert (run.server_rc, run.shm_left) == (0, []), run.summary()


def _serve_until_exit(repository, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", "--model-repository", str(repository),
                           *args, *LOCAL_PORTS], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("model", "args", "line"), [
    ("init_error", (), "name 'lorem_ipsum' is not defined"),
    ("auto_complete_error", ("--strict-model-config=false",), "name 'undefined_variable' is not defined"),
])
def test_a_model_that_fails_to_load_stops_the_server_with_its_error(tmp_path, model, args, line):
    stage(qa_folder().parent, tmp_path / "models", [model])
    done = _serve_until_exit(tmp_path / "models", *args)
    assert done.returncode != 0 and line in done.stdout + done.stderr, done.stdout + done.stderr


def test_an_error_in_finalize_is_logged_and_the_server_stops_cleanly(tmp_path):
    stage(qa_folder().parent, tmp_path / "models", ["fini_error"])
    with serve("--model-repository", str(tmp_path / "models")) as server:
        pass
    assert "name 'undefined_variable' is not defined" in server.log
