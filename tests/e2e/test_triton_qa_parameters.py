"""Triton's `qa/L0_parameters/parameters_test.py`, unchanged, against `pytriton serve --model-repository` serving its
repository, once per server its test.sh starts (request parameters into a Python-backend model's `parameters()`,
through HTTP, gRPC, their asyncio clients, the gRPC stream and an ensemble; headers forwarded by
--http/grpc-header-forward-pattern, case-insensitive unless the pattern says `(?-i)`; a `triton_` key refused).

The repository's `identity` uses Triton's C++ identity backend, which pytriton does not have: it is staged as a
Python-backend model of the same config that returns its input (the ensemble's first step).

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_parameters and qa/common, and this machine allows network namespaces (tests/_support/triton_qa.py).
"""

from __future__ import annotations

import shutil

import pytest

from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_parameters")

IDENTITY = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(
            [pb_utils.Tensor("OUTPUT0", r.get_input_tensor_by_name("INPUT0").as_numpy())]) for r in requests]
'''

# test.sh's servers: TEST_HEADER, and the server's options.
SERVERS = {
    "test_params": (),
    "test_headers": ("--grpc-header-forward-pattern", "my_header.*", "--http-header-forward-pattern", "my_header.*"),
    "test_header_forward_pattern_case_insensitive": ("--grpc-header-forward-pattern", "MY_HEADER.*",
                                                     "--http-header-forward-pattern", "MY_HEADER.*"),
    "test_grpc_header_forward_pattern_case_sensitive": ("--grpc-header-forward-pattern", "(?-i)MY_HEADER.*"),
}

TESTS = ["test_grpc_parameter", "test_http_parameter", "test_async_http_parameter", "test_async_grpc_parameter",
         "test_http_async_parameter", "test_grpc_async_parameter", "test_grpc_stream_parameter",
         "test_ensemble_parameter_forwarding"]


@pytest.mark.parametrize("header", list(SERVERS))
def test_every_test_passes_as_on_tritonserver(tmp_path, header):
    repository = tmp_path / "model_repository"
    shutil.copytree(qa_folder() / "L0_parameters" / "model_repository", repository)
    config = repository / "identity" / "config.pbtxt"
    config.write_text(config.read_text().replace('backend: "identity"', 'backend: "python"'))
    (repository / "identity" / "1").mkdir(parents=True, exist_ok=True)
    (repository / "identity" / "1" / "model.py").write_text(IDENTITY)
    (repository / "ensemble" / "1").mkdir(parents=True, exist_ok=True)  # (test.sh makes it: no files in git)
    run = run_triton_tests(qa_folder() / "L0_parameters" / "parameters_test.py", repository,
                           server_args=SERVERS[header], env={"TEST_HEADER": header})
    assert run.ready and run.server_rc == 0, run.summary()
    assert run.outcomes == {f"InferenceParametersTest::{name}": "passed" for name in TESTS}, run.summary()
