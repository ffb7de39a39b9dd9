"""Triton's client-API test files of `qa/L0_grpc`, `qa/L0_http` and `qa/L0_logging`, unchanged, against `pytriton serve
--model-repository`, each with the server options its test.sh gives it:

- python_grpc_aio_test.py and python_http_aio_test.py: every call of the asyncio clients (health, metadata, config,
  index, load/unload, statistics, trace settings, system and CUDA shared memory);
- logging_endpoint_test.py: the log settings, read and changed over HTTP and gRPC (with qa/L0_logging's test.sh
  last server's options: none);
- qa/L0_trace's trace_endpoint_test.py: the trace settings, global and per model, read, changed and cleared over HTTP
  and gRPC (its test.sh's `--trace-config` options; the trace file by the relative name it gives);
- python_unit_test.py's RestrictedProtocolTest (--grpc-restricted-protocol) and http_restricted_api_test.py's
  RestrictedAPITest (--http-restricted-api);
- the restriction options Triton refuses at start, with its words.

Their model is Triton's example `simple` (docs/examples/model_repository: INT32[16] x 2 -> sum and difference, a
TensorFlow graph there); here the same config.pbtxt with a Python-backend model.py computing the same. Their
test.sh serves the whole example repository (7 or 8 models, ONNX and TensorFlow); the aio tests' index count is the
only assertion that depends on that, listed in NEEDS.

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_grpc, qa/L0_http, qa/L0_logging and qa/common, and this machine allows network namespaces
(tests/_support/triton_qa.py).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests._support.paths import REPO
from tests._support.triton_qa import ADD_SUB_MODEL, qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_grpc", "L0_http", "L0_logging", "L0_trace")

SIMPLE_CONFIG = """name: "simple"
backend: "python"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
"""


AIO_CALLS = ["test_get_cuda_shared_memory_status", "test_get_inference_statistics", "test_get_model_config",
             "test_get_model_metadata", "test_get_server_metadata", "test_get_system_shared_memory_status",
             "test_get_trace_settings", "test_is_model_ready", "test_is_server_live", "test_is_server_ready",
             "test_load_model", "test_register_cuda_shared_memory", "test_register_system_shared_memory",
             "test_unload_model", "test_unregister_cuda_shared_memory", "test_unregister_system_shared_memory",
             "test_update_trace_settings"]
# Needs Triton's whole example repository (its index holds 7 models for L0_http, 8 for L0_grpc).
NEEDS = {"test_get_model_repository_index": "1 != "}

RUNS = {
    "grpc_aio": ("L0_grpc/python_grpc_aio_test.py", (), (), "TestGrpcAioClient", AIO_CALLS),
    "http_aio": ("L0_http/python_http_aio_test.py", (), (), "TestHttpAioClient", AIO_CALLS),
    "grpc_restricted": ("L0_grpc/python_unit_test.py",
                        ("--grpc-restricted-protocol=model-repository:admin-key=admin-value",
                         "--grpc-restricted-protocol=inference,health:infer-key=infer-value"),
                        ("RestrictedProtocolTest",), "RestrictedProtocolTest",
                        ["test_health", "test_infer", "test_model_repository", "test_sanity", "test_stream_infer"]),
    "log_settings": ("L0_logging/logging_endpoint_test.py", (), (), "LogEndpointTest",
                     ["test_grpc_get_settings", "test_grpc_update_settings", "test_http_get_settings",
                      "test_http_update_settings"]),
    "trace_settings": ("L0_trace/trace_endpoint_test.py",
                       ("--trace-config", "triton,file=global_unittest.log", "--trace-config", "level=TIMESTAMPS",
                        "--trace-config", "rate=1"), (), "TraceEndpointTest",
                       ["test_grpc_clear_settings", "test_grpc_get_settings", "test_grpc_update_settings",
                        "test_http_clear_settings", "test_http_get_settings", "test_http_update_settings"]),
    "http_restricted": ("L0_http/http_restricted_api_test.py",
                        ("--http-restricted-api=model-repository:admin-key=admin-value",
                         "--http-restricted-api=inference,metadata:infer-key=infer-value"),
                        ("RestrictedAPITest",), "RestrictedAPITest",
                        ["test_infer", "test_metadata", "test_model_repository", "test_sanity"]),
}


@pytest.fixture
def simple_repository(tmp_path):
    model = tmp_path / "models" / "simple"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(SIMPLE_CONFIG)
    (model / "1" / "model.py").write_text(ADD_SUB_MODEL)
    return tmp_path / "models"


@pytest.mark.parametrize("run_name", list(RUNS))
def test_passes_as_on_tritonserver(simple_repository, run_name):
    path, server_args, tests, cls, passes = RUNS[run_name]
    run = run_triton_tests(qa_folder() / path, simple_repository, tests=tests, server_args=server_args,
                           runner="unittest")
    assert run.ready and run.server_rc == 0 and run.client_rc is not None, run.summary()
    expected = {f"{cls}::{name}": "passed" for name in passes}
    assert {name: outcome for name, outcome in run.outcomes.items() if name in expected} == expected, run.summary()
    for name, words in NEEDS.items() if cls.endswith("AioClient") else ():
        assert run.outcomes[f"{cls}::{name}"] == "failed" and words in run.messages[f"{cls}::{name}"], run.summary()
    assert len(run.outcomes) == len(expected) + (len(NEEDS) if cls.endswith("AioClient") else 0), run.summary()


@pytest.mark.parametrize(("options", "words"), [
    # qa/L0_http/test.sh and qa/L0_grpc/test.sh: the start fails, and the log says so in these words
    (("--http-restricted-api=model-repository,health:k1=v1", "--http-restricted-api=metadata,health:k2=v2"),
     "api 'health' can not be specified in multiple config groups"),
    (("--http-restricted-api=model-reposit,health:k1=v1", "--http-restricted-api=metadata,health:k2=v2"),
     "unknown restricted api 'model-reposit'"),
    (("--grpc-restricted-protocol=model-repository,health:k1=v1", "--grpc-restricted-protocol=metadata,health:k2=v2"),
     "protocol 'health' can not be specified in multiple config groups"),
    (("--grpc-restricted-protocol=model-reposit,health:k1=v1", "--grpc-restricted-protocol=metadata,health:k2=v2"),
     "unknown restricted protocol 'model-reposit'"),
])
def test_restrictions_triton_refuses_at_start(simple_repository, options, words):
    done = subprocess.run([sys.executable, "-m", "pytriton.cli", "serve", "--model-repository",
                           str(simple_repository), *options], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and (done.stdout + done.stderr).count(words) == 1, done.stdout + done.stderr
