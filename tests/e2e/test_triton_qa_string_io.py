"""Triton's `qa/L0_string_io/string_client_test.py` (BYTES tensors of unicode and non-unicode bytes, numpy object,
bytes and str dtypes, through every HTTP and gRPC client call, binary and JSON), unchanged, against `pytriton serve
--model-repository` serving its test.sh's two models:

- `string_identity` of qa/python_models, edited as test.sh edits it (dims [ 8 ]);
- `graphdef_nobatch_zero_1_object`, a TensorFlow identity model there. Its configuration is written by Triton's own
  generator (qa/common/gen_qa_identity_models.py, `create_tf_modelconfig`), and served as `backend: "identity"` by the
  Python-based backend tests/_support/triton_qa_backends/identity.

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_string_io, qa/python_models and qa/common, and this machine allows network namespaces.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_string_io", "python_models")

BACKENDS = ("--backend-directory", str(Path(__file__).resolve().parent.parent / "_support" / "triton_qa_backends"))

GENERATE = """
import sys
import gen_qa_identity_models as models
import test_util
from gen_common import np_dtype_string
models.tu = test_util  # (its script imports it when run as a program)
models.create_tf_modelconfig(False, sys.argv[1], 1, 1, 0, np_dtype_string, [-1])
"""


def test_string_client_test_passes_as_on_tritonserver(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    subprocess.run([sys.executable, "-c", GENERATE, str(models)], check=True, cwd=qa_folder() / "common",
                   env={"PYTHONPATH": str(qa_folder() / "common")})
    identity = models / "graphdef_nobatch_zero_1_object"
    config = identity / "config.pbtxt"
    config.write_text(config.read_text().replace('platform: "tensorflow_graphdef"', 'backend: "identity"'))
    (identity / "1").mkdir()
    source = qa_folder() / "python_models" / "string_identity"
    (models / "string_identity" / "1").mkdir(parents=True)
    shutil.copyfile(source / "model.py", models / "string_identity" / "1" / "model.py")
    (models / "string_identity" / "config.pbtxt").write_text(
        (source / "config.pbtxt").read_text().replace("[ 1 ]", "[ 8 ]"))
    run = run_triton_tests(qa_folder() / "L0_string_io" / "string_client_test.py", models, server_args=BACKENDS,
                           runner="unittest")
    assert run.ready and run.server_rc == 0, run.summary()
    assert run.outcomes == {"ClientStringTest::test_tf_unicode_bytes": "passed"}, run.summary()
