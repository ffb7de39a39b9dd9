"""Triton's `qa/L0_http/http_test.py` (the binary tensor extension's raw bodies, BYTES elements, several inputs,
variable dimensions, Transfer-Encoding from the client, a full queue's status code), unchanged, against `pytriton
serve --model-repository`, run as its test.sh runs it (`python http_test.py`: 9 tests).

Its models are Triton's `onnx_zero_*` identity models (INPUTi -> OUTPUTi), which are ONNX files there. Here their
configurations are written by Triton's own generator (qa/common/gen_qa_identity_models.py, `create_onnx_modelconfig`,
with the arguments its script uses), then served by a Python-backend model.py returning each input as its output;
test.sh's two edited copies (`onnx_zero_1_object_1_element`, `onnx_zero_1_float32_queue`) are made as it makes them.

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_http and qa/common, and this machine allows network namespaces (tests/_support/triton_qa.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_http")

# Triton's generator, with the dtypes, shapes and input counts gen_qa_identity_models.py gives these four models.
GENERATE = """
import sys
import numpy as np
import gen_qa_identity_models as models
import test_util
from gen_common import np_dtype_string
models.tu = test_util  # (its script imports it when run as a program)
for dtype, shape, count in [(np.float32, [-1], 1), (np_dtype_string, [-1], 1), (np.float16, [-1, -1], 1),
                            (np.float32, [-1], 3)]:
    models.create_onnx_modelconfig(True, sys.argv[1], 1, count, 8, dtype, shape)
"""

IDENTITY = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """INPUTi -> OUTPUTi, as Triton's onnx_zero_* identity models."""

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT" + t.name()[len("INPUT"):], t.as_numpy())
                                            for t in request.inputs()]) for request in requests]
'''

QUEUE = """dynamic_batching {
    max_queue_delay_microseconds: 1000000
    preferred_batch_size: [ 8 ]
    default_queue_policy {
        max_queue_size: 1
    }
}
"""

PASSES = ["test_byte", "test_byte_too_many_elements", "test_content_encoding_unsupported_client",
          "test_descriptive_status_code", "test_multi_inputs", "test_multi_variable_dimensions", "test_raw_binary",
          "test_raw_binary_longer"]

# Fails on purpose: the request carries Content-Length beside Transfer-Encoding: chunked (`requests` adds the
# length to a bytes body); pytriton refuses such a request (docs/security.md), tritonserver reads the chunks.
DIFFERS = {"test_content_encoding_chunked_manually": "400 Client Error: Bad Request"}


def stage(repository: Path) -> None:
    repository.mkdir()
    subprocess.run([sys.executable, "-c", GENERATE, str(repository)], check=True, cwd=qa_folder() / "common",
                   env={"PYTHONPATH": str(qa_folder() / "common")})
    for model in list(repository.iterdir()):
        config = model / "config.pbtxt"
        config.write_text(config.read_text().replace('platform: "onnxruntime_onnx"', 'backend: "python"'))
        (model / "1").mkdir()
        (model / "1" / "model.py").write_text(IDENTITY)
    for source, name, edit in [
        ("onnx_zero_1_object", "onnx_zero_1_object_1_element", lambda text: text.replace("-1", "1", 1)),
        ("onnx_zero_1_float32", "onnx_zero_1_float32_queue", lambda text: text + QUEUE),
    ]:
        (repository / name / "1").mkdir(parents=True)
        (repository / name / "1" / "model.py").write_text(IDENTITY)
        text = (repository / source / "config.pbtxt").read_text().replace(source, name)
        (repository / name / "config.pbtxt").write_text(edit(text))


def test_http_test_passes_as_on_tritonserver_but_for_the_documented_refusal(tmp_path):
    repository = tmp_path / "python_unit_test_models"
    stage(repository)
    run = run_triton_tests(qa_folder() / "L0_http" / "http_test.py", repository, runner="unittest")
    assert run.ready and run.server_rc == 0, run.summary()
    assert {name.split("::")[1] for name in run.outcomes} == set(PASSES) | set(DIFFERS), run.summary()
    for name in PASSES:
        assert run.outcomes[f"HttpTest::{name}"] == "passed", run.summary()
    for name, words in DIFFERS.items():
        assert run.outcomes[f"HttpTest::{name}"] != "passed" and words in run.messages[f"HttpTest::{name}"], \
            run.summary()
