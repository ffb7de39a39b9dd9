"""Triton's `qa/L0_nan_inf/nan_inf_test.py` (NaN and infinities in an FP32 output, over gRPC, HTTP through
tritonclient, and HTTP's JSON read raw), unchanged, against `pytriton serve --model-repository` serving its `models`
(3 tests), run as its test.sh runs it (`python3 nan_inf_test.py`).

The test file and the model were written for numpy 1 (`np.NINF`, removed in numpy 2). The test runs with
PYTRITON_TRITON_QA_PYTHON (tests/_support/triton_qa.py says how to make one with numpy 1), and is skipped when that
interpreter has numpy 2; the model runs in this server's environment, so its copy says `-np.inf` for `np.NINF`.

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_nan_inf and qa/common, and this machine allows network namespaces.
"""

from __future__ import annotations

import shutil

import pytest

from tests._support.triton_qa import client_numpy, qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_nan_inf")


def test_nan_inf_test_passes_as_on_tritonserver(tmp_path):
    if not client_numpy().startswith("1."):
        pytest.skip(f"the test file needs numpy 1 (np.NINF); its interpreter has {client_numpy() or 'none'}: set "
                    "PYTRITON_TRITON_QA_PYTHON")
    suite = qa_folder() / "L0_nan_inf"
    repository = tmp_path / "models"
    shutil.copytree(suite / "models", repository)
    model = repository / "nan_inf_output" / "1" / "model.py"
    model.write_text(model.read_text().replace("np.NINF", "-np.inf"))
    run = run_triton_tests(suite / "nan_inf_test.py", repository, runner="unittest")
    assert run.ready and run.server_rc == 0, run.summary()
    assert run.outcomes == {f"NanInfTest::{name}": "passed" for name in ("test_grpc", "test_http", "test_http_raw")}, \
        run.summary()
