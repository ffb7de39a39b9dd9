"""Triton's `qa/L0_backend_python/decoupled/decoupled_test.py`, unchanged, against `pytriton serve --model-repository`
serving the models its test.sh stages (the folder's own `models/`, with identity_fp32 and execute_cancel of
`qa/python_models`, the latter made decoupled), on Triton's default ports of a private loopback
(tests/_support/triton_qa.py). Each of its tests passes here, or fails for the reason NEEDS gives; the server's log
holds what test.sh's verify_log_counts looks for.

test.sh also stages `square_int32` from python_backend's examples (decoupled_bls_stream calls it through BLS): a
stand-in of the same config and behaviour is written here (SQUARE_MODEL: n responses of OUT = n for IN = n, sent from
a thread, then the final flag; its finalize prints what the example's prints).

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network namespaces.
"""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from tests._support.triton_qa import QaRun, qa_folder, qa_marks, run_triton_tests
from tests.e2e.triton_qa_staging import DECOUPLED, stage

pytestmark = qa_marks("L0_backend_python", "python_models")

HAS_TORCH = importlib.util.find_spec("torch") is not None

# (Triton 2.51 with its Python backend, on the same staged folder: every test passes but test_decoupled_bls, which
# needs torch in the model there too.)
PASSES = ["test_decoupled_bls_stream", "test_decoupled_execute_cancel", "test_decoupled_execute_error",
          "test_decoupled_raise_exception", "test_decoupled_return_response_error",
          "test_decoupled_send_after_close_error"]

# Tests this machine cannot run, and why (its models are then not staged).
NEEDS: dict[str, str] = {} if HAS_TORCH else {
    "test_decoupled_bls": "torch in the models decoupled_bls and dlpack_add_sub",
}

SQUARE_CONFIG = """name: "square_int32"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: True }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [{ kind: KIND_CPU }]
"""

SQUARE_MODEL = '''import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            thread = threading.Thread(target=self.answer, args=(request.get_response_sender(), n), daemon=True)
            self.threads.append(thread)
            thread.start()
        return None

    def answer(self, sender, n):
        for _ in range(n):
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([n], dtype=np.int32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        print("Finalize invoked")
        for thread in self.threads:
            thread.join()
        print("Finalize complete...")
'''


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> QaRun:
    repository = tmp_path_factory.mktemp("qa-decoupled") / "models"
    own_models = qa_folder() / "L0_backend_python" / "decoupled" / "models"
    shutil.copytree(own_models, repository, ignore=None if HAS_TORCH else shutil.ignore_patterns("decoupled_bls"))
    torch_models = ["dlpack_add_sub"] if HAS_TORCH else []
    stage(qa_folder().parent, repository, ["identity_fp32", "execute_cancel", *torch_models])
    with open(repository / "execute_cancel" / "config.pbtxt", "a") as config:
        config.write(f"\n{DECOUPLED}\n")
    (repository / "square_int32" / "1").mkdir(parents=True)
    (repository / "square_int32" / "config.pbtxt").write_text(SQUARE_CONFIG)
    (repository / "square_int32" / "1" / "model.py").write_text(SQUARE_MODEL)
    # test_decoupled_execute_cancel reads the server's log as test.sh names it, in its working folder
    return run_triton_tests(qa_folder() / "L0_backend_python" / "decoupled" / "decoupled_test.py", repository,
                            server_log_name="decoupled_server.log")


def test_every_test_of_the_file_is_accounted_for(run):
    assert run.ready, run.summary()
    names = {name.split("::")[1] for name in run.outcomes}
    assert names == set(PASSES) | set(NEEDS), run.summary()


@pytest.mark.parametrize("name", PASSES)
def test_passes_as_on_tritonserver(run, name):
    assert run.outcomes.get(f"DecoupledTest::{name}") == "passed", run.summary()


@pytest.mark.parametrize("name", list(NEEDS))
def test_needs_what_this_machine_lacks(run, name):
    assert run.outcomes[f"DecoupledTest::{name}"] == "failed", run.summary()


def test_every_finalize_ran_at_shutdown(run):
    """test.sh's verify_log_counts: each model that prints them (square_int32, decoupled_execute_error, and
    decoupled_bls where torch is) printed "Finalize invoked" and "Finalize complete..." once."""
    models = 3 if HAS_TORCH else 2
    assert run.server_log.count("Finalize invoked") == models, run.summary()
    assert run.server_log.count("Finalize complete...") == models, run.summary()


def test_the_server_stopped_cleanly(run):
    assert run.server_rc == 0, run.summary()
