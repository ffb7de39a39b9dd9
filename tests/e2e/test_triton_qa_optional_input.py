"""Triton's `qa/L0_optional_input/optional_input_test.py` (optional inputs through the dynamic batcher: requests
that give other inputs do not batch together and close the waiting batch; ensembles that leave an optional input or
a connecting tensor out), unchanged, against `pytriton serve --model-repository` serving the suite's `models`, one
server per test as its test.sh runs them.

`identity_2_float32` uses Triton's C++ identity backend there; here the same config.pbtxt with a Python-backend
model.py doing what that backend does (each requested OUTPUTi is INPUTi, or zeros when the request left INPUTi
out). The tests wait for queue delays of 5 s: about a minute in all.

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_optional_input and qa/common, and this machine allows network namespaces (tests/_support/triton_qa.py).
"""

from __future__ import annotations

import shutil

import pytest

from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_optional_input")

IDENTITY = '''import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """What Triton's identity backend does for this config: each requested OUTPUTi is INPUTi, or zeros shaped as the
    inputs given when the request left INPUTi out (an optional input)."""

    def execute(self, requests):
        responses = []
        for request in requests:
            given = {t.name(): t.as_numpy() for t in request.inputs()}
            shape = next(iter(given.values())).shape
            outputs = []
            for name in sorted(request.requested_output_names()):
                value = given.get("INPUT" + name[len("OUTPUT"):])
                outputs.append(pb_utils.Tensor(name, value if value is not None else np.zeros(shape, np.float32)))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
'''

TESTS = ["test_all_inputs", "test_optional_same_input", "test_optional_mix_inputs", "test_optional_mix_inputs_2",
         "test_ensemble_all_inputs", "test_ensemble_optional_same_input", "test_ensemble_optional_mix_inputs",
         "test_ensemble_optional_mix_inputs_2", "test_ensemble_optional_pipeline",
         "test_ensemble_optional_connecting_tensor"]


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    models = tmp_path_factory.mktemp("optional-input") / "models"
    shutil.copytree(qa_folder() / "L0_optional_input" / "models", models)
    for model in models.iterdir():
        (model / "1").mkdir(exist_ok=True)  # (test.sh makes the version folders)
    config = models / "identity_2_float32" / "config.pbtxt"
    config.write_text(config.read_text().replace('backend: "identity"', 'backend: "python"'))
    (models / "identity_2_float32" / "1" / "model.py").write_text(IDENTITY)
    return models


@pytest.mark.parametrize("name", TESTS)
def test_passes_as_on_tritonserver(repository, name):
    run = run_triton_tests(qa_folder() / "L0_optional_input" / "optional_input_test.py", repository,
                           tests=[f"OptionalInputTest::{name}"], runner="unittest")
    assert run.ready and run.server_rc == 0, run.summary()
    assert run.outcomes == {f"OptionalInputTest::{name}": "passed"}, run.summary()
