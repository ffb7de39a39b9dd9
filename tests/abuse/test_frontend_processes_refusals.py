"""`pytriton serve --frontend-processes 2`: every refusal docs/multi-frontend.md lists ("Refused at start") answers
its documented message, whichever way the refused thing comes in (a flag, a repository model's config)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests._support.paths import REPO
from tests._support.serving import tensor_args

REPOS = REPO / "tests" / "repositories"
CALLABLE = ["tests.frontend_models:server_pid", *tensor_args("input", [("IN", "fp32", "-1")]),
            *tensor_args("output", [("OUT", "fp32", "-1"), ("SERVER", "int64", "1")])]


@pytest.mark.parametrize("args, reason", [
    ([*CALLABLE, "--model-repository", str(REPOS / "models"), "--model-control-mode", "poll"],
     "--model-control-mode poll"),
    (["--model-repository", str(REPOS / "sequence")], "uses sequence batching"),  # a repository model's config
    (["--model-repository", str(REPOS / "implicit_state")], "uses sequence batching"),
    ([*CALLABLE, "--trace-config", "triton,file=/tmp/never-written.json"], "--trace-config"),
    ([*CALLABLE, "--allow-sagemaker", "true"], "SageMaker and Vertex AI"),
    ([*CALLABLE, "--allow-vertex-ai", "true"], "SageMaker and Vertex AI"),
    ([*CALLABLE, "--openai-port", "0"], "--openai-port: the OpenAI port is served by one process only"),
], ids=["poll", "repository-sequence", "repository-implicit-state", "trace-file", "sagemaker", "vertex-ai", "openai"])
def test_every_documented_refusal_names_the_option_and_why(args, reason):
    command = [sys.executable, "-m", "pytriton.cli", "serve", *args, "--frontend-processes", "2",
               "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Invalid value for --frontend-processes: 2 processes:" in result.stderr, result.stderr
    assert reason in result.stderr, result.stderr
