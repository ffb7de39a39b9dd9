"""Triton's `qa/L0_model_queue/model_queue_test.py` (the dynamic batcher's queue: max_queue_size, REJECT and DELAY
timeouts, a request's timeout override, priority levels, preferred batch sizes), unchanged, against `pytriton serve
--model-repository`, one server per test as its test.sh runs them, each with the configuration its test.sh writes.

Its models use Triton's C++ identity backend (`backend: "identity"`, with an `execute_delay_ms` parameter), served
unchanged here by the Python-based backend tests/_support/triton_qa_backends/identity (`--backend-directory`). The
tests wait for queue delays of 10 s: about two minutes in all.

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_model_queue, qa/custom_models and qa/common, and this machine allows network namespaces.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_model_queue", "custom_models")

BACKENDS = Path(__file__).resolve().parent.parent / "_support" / "triton_qa_backends"

# What test.sh appends to the model's config.pbtxt for each test.
POLICY = "dynamic_batching { \n    preferred_batch_size: [ 4, 8 ]\n    max_queue_delay_microseconds: 10000000\n"
CONFIGS = {
    "test_max_queue_size": "dynamic_batching { \n    preferred_batch_size: [ 4, 8 ]\n    default_queue_policy {\n"
                           "        max_queue_size: 8\n    }\n}\nparameters [\n"
                           '{ key: "execute_delay_ms"; value: { string_value: "5000" }}\n]\n',
    "test_policy_delay": POLICY + "    default_queue_policy {\n        timeout_action: DELAY\n"
                                  "        default_timeout_microseconds: 100000\n    }\n}\n",
    "test_policy_reject": POLICY + "    default_queue_policy {\n        default_timeout_microseconds: 100000\n"
                                   "    }\n}\n",
    "test_timeout_override": POLICY + "    default_queue_policy {\n        allow_timeout_override: true\n"
                                      "        default_timeout_microseconds: 1000000\n    }\n}\n",
    "test_priority_levels": POLICY + "    priority_levels: 2\n    default_priority_level: 2\n}\n",
    "test_max_priority_levels": POLICY + "    priority_levels: 18446744073709551615\n"
                                         "    default_priority_level: 4294967296\n}\n",
    "test_priority_with_policy": "dynamic_batching { \n    preferred_batch_size: [ 4, 8, 32 ]\n"
                                 "    max_queue_delay_microseconds: 10000000\n    priority_levels: 2\n"
                                 "    default_priority_level: 2\n    default_queue_policy {\n"
                                 "        timeout_action: DELAY\n        allow_timeout_override: true\n"
                                 "        default_timeout_microseconds: 11000000\n    }\n    priority_queue_policy {\n"
                                 "        key: 2\n        value: {\n            timeout_action: REJECT\n"
                                 "            allow_timeout_override: true\n"
                                 "            default_timeout_microseconds: 11000000\n        }\n    }\n}\n",
}

# Fails on purpose: Triton counts an ensemble request its step's queue rejected twice in the ensemble's
# nv_inference_request_failure (its test's own note: "the failure counts of their composing models as well as the
# parent model"); pytriton counts each failed request of the ensemble once.
DIFFERS = {"test_policy_reject": 'model="ensemble_zero_1_float32",reason="OTHER",version="1"} 4'}


def stage(root: Path, name: str) -> Path:
    models = root / "models"
    shutil.copytree(qa_folder() / "L0_model_queue" / "ensemble_zero_1_float32", models / "ensemble_zero_1_float32")
    shutil.copytree(qa_folder() / "custom_models" / "custom_zero_1_float32", models / "custom_zero_1_float32")
    for model in models.iterdir():
        (model / "1").mkdir(exist_ok=True)
    config = models / "custom_zero_1_float32" / "config.pbtxt"
    text = re.sub(r"dims:.*\[.*\]", "dims: [ -1 ]", config.read_text())
    text = re.sub(r"max_batch_size:.*", "max_batch_size: 32", text)
    config.write_text(text + "instance_group [ { kind: KIND_CPU count: 1 }]\n" + CONFIGS[name])
    return models


@pytest.mark.parametrize("name", list(CONFIGS))
def test_as_on_tritonserver(tmp_path, name):
    run = run_triton_tests(qa_folder() / "L0_model_queue" / "model_queue_test.py", stage(tmp_path, name),
                           tests=[f"ModelQueueTest::{name}"], server_args=("--backend-directory", str(BACKENDS)),
                           runner="unittest")
    assert run.ready and run.server_rc == 0, run.summary()
    if name in DIFFERS:
        assert run.outcomes == {f"ModelQueueTest::{name}": "failed"} and DIFFERS[name] in run.client_log, \
            run.summary()
    else:
        assert run.outcomes == {f"ModelQueueTest::{name}": "passed"}, run.summary()
