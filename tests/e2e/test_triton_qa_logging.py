"""Triton's `qa/L0_backend_python/logging` (its test.sh and `logging_test.py`, unchanged) against `pytriton serve`:
three servers of `identity_fp32_logging` (a model that logs one line of each pb_utils.Logger level in initialize,
two in execute and one in finalize), with the logging settings as they start, with `log_verbose_level` 1, and with
`log_info`, `log_warning` and `log_error` off (test.sh's curl of POST /v2/logging before the test file runs); the
server's log then holds the lines test.sh counts, as tritonserver 2.51's does.

Slow, and skipped unless PYTRITON_TRITON_SERVER_SRC names a checkout of triton-inference-server/server (r24.10, or
its `qa` folder) and this machine allows network and mount namespaces.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests._support.triton_qa import qa_folder, qa_marks, run_triton_tests
from tests.e2e.triton_qa_staging import stage

pytestmark = qa_marks("L0_backend_python", "python_models")

POST = ("import sys, urllib.request\n"
        "for body in sys.argv[1:]:\n"
        "    urllib.request.urlopen(urllib.request.Request('http://localhost:8000/v2/logging', data=body.encode()))\n")

# subtest: (the settings test.sh posts, one body at a time; the count of each non-verbose message; of verbose ones)
SUBTESTS = {
    "default": ((), 4, 0),
    "verbose": (({"log_verbose_level": 1},), 4, 3),  # (initialize's verbose line came before the change)
    "disabled": (({"log_info": False}, {"log_warning": False}, {"log_error": False}), 1, 0),  # (initialize's lines)
}


@pytest.mark.parametrize("subtest", list(SUBTESTS))
def test_the_servers_log_holds_the_lines_test_sh_counts(tmp_path, subtest):
    posts, non_verbose, verbose = SUBTESTS[subtest]
    stage(qa_folder().parent, tmp_path / "models", ["identity_fp32_logging"])
    before = [[sys.executable, "-c", POST, *(json.dumps(body) for body in posts)]] if posts else []
    run = run_triton_tests(qa_folder() / "L0_backend_python" / "logging" / "logging_test.py", tmp_path / "models",
                           before=before)
    assert run.outcomes == {"LogTest::test_log_output": "passed"} and run.server_rc == 0, run.summary()
    counts = {message: sum(message in line for line in run.server_log.splitlines())
              for message in ("Specific Msg!", "Info Msg!", "Warning Msg!", "Error Msg!", "Verbose Msg!")}
    assert counts == {"Specific Msg!": non_verbose, "Info Msg!": non_verbose, "Warning Msg!": non_verbose,
                      "Error Msg!": non_verbose, "Verbose Msg!": verbose}, run.summary()
