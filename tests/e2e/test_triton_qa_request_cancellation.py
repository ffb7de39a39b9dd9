"""Triton's `qa/L0_request_cancellation` client tests, unchanged, against `pytriton serve --model-repository`, with
the models its test.sh writes (`backend: "identity"` with an `execute_delay_ms` parameter, served unchanged by the
Python-based backend tests/_support/triton_qa_backends/identity):

- grpc_cancellation_test.py: a request cancelled by the gRPC client (async, stream, asyncio) ends CANCELLED, one
  server per test as test.sh runs them (its last case needs Triton's TRITONSERVER_DELAY_GRPC_PROCESS test hook and
  is left out);
- scheduler_test.py: cancelled requests queued in the dynamic batcher, the sequence batcher (Direct and Oldest, in a
  slot's queue or the backlog: the whole sequence is cancelled), an ensemble and a stream.

(Its request_cancellation_test is a C++ program, and implicit_state_test a PyTorch model.) The models wait 6 and
10 s per execution: about two minutes in all.

Slow; skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10) with
qa/L0_request_cancellation and qa/common, and this machine allows network namespaces (tests/_support/triton_qa.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests

pytestmark = qa_marks("L0_request_cancellation")

BACKENDS = Path(__file__).resolve().parent.parent / "_support" / "triton_qa_backends"
SERVER = ("--backend-directory", str(BACKENDS))

TENSORS = ('input [{ name: "INPUT0" \n data_type: TYPE_%s \n dims: [ -1 ] }]\n'
           'output [{ name: "OUTPUT0" \n data_type: TYPE_%s \n dims: [ -1 ] }]\n')
DELAY = 'parameters [{ key: "execute_delay_ms" \n value: { string_value: "%d" } }]\n'
ONE_INSTANCE = "instance_group [{ count: 1 \n kind: KIND_CPU }]\n"

# What test.sh writes (echo lines) for each suite's models.
GRPC_MODELS = {
    "custom_identity_int32": 'name: "custom_identity_int32"\nbackend: "identity"\nmax_batch_size: 1024\n'
                             + TENSORS % ("INT32", "INT32") + "instance_group [{ kind: KIND_CPU }]\n" + DELAY % 10000,
}
SCHEDULER_MODELS = {
    "dynamic_batch": 'name: "dynamic_batch"\nbackend: "identity"\nmax_batch_size: 2\n' + TENSORS % ("FP32", "FP32")
                     + ONE_INSTANCE + "dynamic_batching { max_queue_delay_microseconds: 600000 }\n" + DELAY % 6000,
    "sequence_direct": 'name: "sequence_direct"\nbackend: "identity"\nmax_batch_size: 1\n' + TENSORS % ("FP32", "FP32")
                       + ONE_INSTANCE + "sequence_batching { direct { } \n max_sequence_idle_microseconds: 6000000 }\n"
                       + DELAY % 6000,
    "sequence_oldest": 'name: "sequence_oldest"\nbackend: "identity"\nmax_batch_size: 1\n' + TENSORS % ("FP32", "FP32")
                       + ONE_INSTANCE + "sequence_batching { oldest { max_candidate_sequences: 1 } \n "
                       "max_sequence_idle_microseconds: 6000000 }\n" + DELAY % 6000,
    "ensemble_model": 'name: "ensemble_model"\nplatform: "ensemble"\nmax_batch_size: 1\n' + TENSORS % ("FP32", "FP32")
                      + "ensemble_scheduling { step [\n"
                      '{ model_name: "dynamic_batch" \n model_version: -1 \n input_map { key: "INPUT0" \n '
                      'value: "INPUT0" } \n output_map { key: "OUTPUT0" \n value: "out" } },\n'
                      '{ model_name: "dynamic_batch" \n model_version: -1 \n input_map { key: "INPUT0" \n '
                      'value: "out" } \n output_map { key: "OUTPUT0" \n value: "OUTPUT0" } }\n] }\n',
}
SCHEDULER_TESTS = ["test_direct_sequence_batch_scheduler_request_cancellation",
                   "test_dynamic_batch_scheduler_request_cancellation", "test_ensemble_scheduler_request_cancellation",
                   "test_oldest_sequence_batch_scheduler_request_cancellation",
                   "test_scheduler_streaming_request_cancellation",
                   "test_sequence_batch_scheduler_backlog_request_cancellation"]


def write(root: Path, models: dict[str, str]) -> Path:
    for name, config in models.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(config)
    return root


@pytest.mark.parametrize("name", ["test_grpc_async_infer", "test_grpc_stream_infer", "test_aio_grpc_async_infer",
                                  "test_aio_grpc_stream_infer"])
def test_grpc_cancellation_as_on_tritonserver(tmp_path, name):
    run = run_triton_tests(qa_folder() / "L0_request_cancellation" / "grpc_cancellation_test.py",
                           write(tmp_path / "models", GRPC_MODELS), tests=[f"GrpcCancellationTest::{name}"],
                           server_args=SERVER, runner="unittest")
    assert run.ready and run.server_rc == 0, run.summary()
    assert run.outcomes == {f"GrpcCancellationTest::{name}": "passed"}, run.summary()


def test_scheduler_cancellation_as_on_tritonserver(tmp_path):
    run = run_triton_tests(qa_folder() / "L0_request_cancellation" / "scheduler_test.py",
                           write(tmp_path / "models", SCHEDULER_MODELS), server_args=SERVER, runner="unittest")
    assert run.ready and run.server_rc == 0, run.summary()
    assert run.outcomes == {f"TestScheduler::{name}": "passed" for name in SCHEDULER_TESTS}, run.summary()
