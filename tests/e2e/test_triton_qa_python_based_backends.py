"""Triton's `qa/L0_backend_python/python_based_backends/python_based_backends_test.py`, unchanged, against `pytriton
serve --model-repository R --backend-directory B --model-control-mode explicit`, with R and B staged as its test.sh
stages them: the `add_sub` Python-based backend (`qa/python_models/python_based_backends/add_sub_backend/model.py`),
the models `add` (versions 1 and 2) and `sub` that name it with a model.json each, and the Python model `add_sub`.

Its test.sh also generates `add_sub_pytorch`, a PyTorch-backend (TorchScript) model, which pytriton does not serve:
it is staged with the configuration Triton's generator writes (qa/common/gen_qa_pytorch_model.py) and a Python
model.py computing what the TorchScript model computes (the sum and the difference).

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_backend_python, qa/python_models and qa/common, and this machine allows network namespaces.
"""

from __future__ import annotations

import shutil


from tests._support.triton_qa import ADD_SUB_MODEL, qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_backend_python", "python_models")

PYTORCH_CONFIG = """backend: "python"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
input [ { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


TESTS = ["test_add_sub_models", "test_python_model", "test_pytorch_model"]


def test_python_based_backends_test_passes_as_on_tritonserver(tmp_path):
    models = qa_folder() / "python_models"
    backends = tmp_path / "backends"
    (backends / "add_sub").mkdir(parents=True)
    backend = models / "python_based_backends" / "add_sub_backend" / "model.py"
    shutil.copyfile(backend, backends / "add_sub" / "model.py")
    repository = tmp_path / "models"
    for name, operation in (("add", "add"), ("sub", "sub")):
        (repository / name / "1").mkdir(parents=True)
        (repository / name / "1" / "model.json").write_text('{ "operation": "%s" }\n' % operation)
        (repository / name / "config.pbtxt").write_text('backend: "add_sub"\n')
    shutil.copytree(repository / "add" / "1", repository / "add" / "2")
    (repository / "add_sub" / "1").mkdir(parents=True)
    shutil.copyfile(models / "add_sub" / "model.py", repository / "add_sub" / "1" / "model.py")
    shutil.copyfile(models / "add_sub" / "config.pbtxt", repository / "add_sub" / "config.pbtxt")
    shutil.copytree(repository / "add_sub" / "1", repository / "add_sub" / "2")
    (repository / "add_sub_pytorch" / "1").mkdir(parents=True)
    (repository / "add_sub_pytorch" / "config.pbtxt").write_text(PYTORCH_CONFIG)
    (repository / "add_sub_pytorch" / "1" / "model.py").write_text(ADD_SUB_MODEL)
    suite = qa_folder() / "L0_backend_python" / "python_based_backends"
    run = run_triton_tests(suite / "python_based_backends_test.py", repository,
                           server_args=("--backend-directory", str(backends), "--model-control-mode", "explicit"))
    assert run.ready and run.server_rc == 0, run.summary()
    assert run.outcomes == {f"PythonBasedBackendsTest::{name}": "passed" for name in TESTS}, run.summary()
