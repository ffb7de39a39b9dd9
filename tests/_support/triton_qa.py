"""Runs one of Triton's own client test files (the server repository's `qa/L0_backend_python/**/*_test.py` and the
like) unchanged against `pytriton serve`, as Triton's QA scripts run it against tritonserver.

Triton's test files talk to `localhost:8000`, `:8001` and `:8002`, some of them with the address written in. So that
runs do not meet on those ports (pytest-xdist's processes, two checkouts on one machine), each run gets a network
namespace of its own (`unshare --net`, a private loopback): tests/_support/triton_qa_driver.py starts the server
there, runs the test file with pytest once it is ready, stops the server and writes what happened.

Triton's `qa/common/shm_util.py` probes Triton's own shared-memory pool (`/dev/shm/triton_python_backend_shm_region*`)
through its compiled `triton_shm_monitor`. pytriton has no such region, so the probe has nothing to watch; a module
of that name is put on the path (tests/_support/triton_qa_shims/) whose manager refuses to be made, so that the import
works and a region of that name, were one ever there, would fail the test instead of being skipped. Our own
segments are checked by the suite's /dev/shm check after every test.

    SOURCE  # a checkout of triton-inference-server/server (PYTRITON_TRITON_SERVER_SRC), or None

The test files run with this interpreter (its tritonclient, numpy), or with PYTRITON_TRITON_QA_PYTHON's: some need
what Triton's own test image has, e.g. numpy 1 (`np.NINF`) or tritonclient 2.51 (FP32 arrays for BF16 inputs):

    python3 -m venv /tmp/qa-client
    /tmp/qa-client/bin/pip install "numpy<2" "tritonclient[all]==2.51.0" pytest requests sseclient-py
    PYTRITON_TRITON_QA_PYTHON=/tmp/qa-client/bin/python ...
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from tests._support.paths import REPO

_SOURCE_ENV = os.environ.get("PYTRITON_TRITON_SERVER_SRC")
SOURCE: Path | None = Path(_SOURCE_ENV) if _SOURCE_ENV else None
"""A checkout of Triton's server repository (or of its `qa` folder's parents), from PYTRITON_TRITON_SERVER_SRC."""

SHIMS = Path(__file__).parent / "triton_qa_shims"
CLIENT_PYTHON = os.environ.get("PYTRITON_TRITON_QA_PYTHON") or sys.executable
"""The interpreter that runs Triton's test files."""
# A loopback and a /dev/shm of its own for each run: Triton's ports, and Triton's shm-region names, meet no other's
NAMESPACES = ("unshare", "--net", "--mount", "--")


def qa_folder() -> Path:
    """The checkout's `qa` folder."""
    assert SOURCE is not None
    return SOURCE / "qa" if (SOURCE / "qa").is_dir() else SOURCE


def qa_marks(*folders: str) -> list[pytest.MarkDecorator]:
    """A module of Triton's QA runs: slow; skipped without a checkout holding `qa/<folder>` of each of `folders`
    (PYTRITON_TRITON_SERVER_SRC), or where this machine allows no network namespace."""
    missing = SOURCE is None or not all((qa_folder() / folder).is_dir() for folder in folders)
    where = ", ".join(f"qa/{folder}" for folder in folders) or "its qa folder"
    return [
        pytest.mark.slow,
        pytest.mark.skipif(missing, reason=f"PYTRITON_TRITON_SERVER_SRC names no checkout of Triton's server with "
                                           f"{where}"),
        pytest.mark.skipif(bool(network_namespaces()), reason=network_namespaces() or "-"),
    ]


ADD_SUB_MODEL = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (what Triton's example `simple` and its QA's PyTorch
    AddSubNet compute)."""

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a + b),
                                                         pb_utils.Tensor("OUTPUT1", a - b)]))
        return responses
'''
"""A Python-backend model.py standing in for Triton's add/sub models of other backends."""


@cache
def network_namespaces() -> str:
    """'' when this machine lets a process have network and mount namespaces of its own, else why not."""
    try:
        done = subprocess.run([*NAMESPACES, "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare --net --mount: {error}"
    return "" if done.returncode == 0 else f"unshare --net --mount: {done.stderr.strip() or done.returncode}"


@cache
def client_numpy() -> str:
    """The numpy version of the interpreter that runs the test files ('' if it has none)."""
    done = subprocess.run([CLIENT_PYTHON, "-c", "import numpy; print(numpy.__version__)"], capture_output=True,
                          text=True, timeout=60)
    return done.stdout.strip() if done.returncode == 0 else ""


@dataclass
class QaRun:
    """What one run gave: each test's outcome by `Class::test` ('passed', 'failed', 'error', 'skipped'), its
    message, the client's and the server's output, how each ended, and what they left in the run's own /dev/shm."""

    outcomes: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    client_log: str = ""
    server_log: str = ""
    client_rc: int | None = None
    server_rc: int | None = None
    ready: bool = False
    shm_left: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """The outcomes and the logs, for an assertion's message."""
        lines = [f"{name}: {outcome} {self.messages.get(name, '')[:300]}" for name, outcome in self.outcomes.items()]
        return ("\n".join(lines) + f"\n--- client (rc {self.client_rc}) ---\n{self.client_log[-6000:]}"
                + f"\n--- server (rc {self.server_rc}) ---\n{self.server_log[-6000:]}")


def run_triton_tests(test_file: Path, repository: Path, *, tests: Sequence[str] = (),
                     server_args: Sequence[str] = (), env: dict[str, str] | None = None,
                     server_log_name: str | None = None, timeout_s: float = 600.0, runner: str = "pytest",
                     runs: int = 1, before: Sequence[Sequence[str]] = (),
                     steps: Sequence[Sequence[str] | dict[str, Sequence[str]]] = ()) -> QaRun:
    """Serve `repository` with `pytriton serve --model-repository` (and `server_args`) on ports 8000, 8001 and 8002
    of a private loopback, with a /dev/shm of its own, run `test_file` there with pytest (only `tests`, each
    `Class::test`, when given), with `env` added to the client's and the server's environment, and return the
    outcomes. With `server_log_name`, the client runs in a scratch folder where the server's log is that file
    (Triton's test.sh writes its server log into the test's folder, and some tests read it there), not in the test
    file's folder.

    `runner="unittest"` runs it as Triton's script does with `python3 file.py` (unittest's runner, needed by a
    test class based on qa/common's `TestResultCollector`); the outcomes are then read from unittest's verbose
    lines. `runs`: how many times the file runs on the same server (as some test.sh run it): a test's outcome is
    that of its first run that did not pass, else 'passed'. `before`: commands run there once the server is ready,
    before the file (as a test.sh's curl of a setting). `steps`, in place of those: what runs on the server, in
    order, each {"tests": [Class::test, ...]} (the file, or those tests of it) or a command (with
    PYTRITON_QA_SERVER_PID and PYTRITON_QA_SERVER_LOG in its environment), as a test.sh that acts on the server
    between tests."""
    if not steps:
        steps = [*before, *({"tests": list(tests)} for _ in range(runs))]
    with tempfile.TemporaryDirectory(prefix="pytriton-qa-") as scratch:
        out = Path(scratch)
        spec = {
            "test_file": str(test_file), "repository": str(repository),
            "steps": [{"tests": list(step["tests"])} if isinstance(step, dict) else {"command": list(step)}
                      for step in steps],
            "server_args": list(server_args), "env": dict(env or {}), "out": str(out), "runner": runner,
            "client_python": CLIENT_PYTHON, "client_timeout_s": max(timeout_s - 120.0, 30.0),
            "server_log_name": server_log_name,
            "pythonpath": [str(SHIMS), str(qa_folder() / "common"), str(test_file.parent)],
        }
        command = [*NAMESPACES, sys.executable, "-m", "tests._support.triton_qa_driver", json.dumps(spec)]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout_s,
                              env=dict(os.environ, PYTRITON_EXIT_WITH_PARENT="1"))
        result = QaRun()
        report = out / "report.json"
        if report.exists():
            facts = json.loads(report.read_text())
            result.client_rc, result.server_rc, result.ready = facts["client_rc"], facts["server_rc"], facts["ready"]
            result.shm_left = facts.get("shm_left", [])
        logs = [_read(out / f"client.{number}.log") for number in range(len(steps))]
        result.client_log = "".join(logs) + done.stdout + done.stderr
        result.server_log = _read(out / "server.log")
        for number, step in enumerate(steps):
            if not isinstance(step, dict):
                continue
            junit = out / f"junit.{number}.xml"
            step_result = QaRun()
            if junit.exists():
                _read_junit(junit, step_result)
            elif runner == "unittest":
                _read_unittest(logs[number], step_result)
            for name, outcome in step_result.outcomes.items():  # (a step's failure is kept over later steps' passes)
                if result.outcomes.get(name, "passed") == "passed":
                    result.outcomes[name] = outcome
                    result.messages[name] = step_result.messages.get(name, "")
        return result


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


# unittest's verbose line of a test: "test_x (module.Class.test_x) ... ok"; a docstring's first line may follow the
# parenthesis on the next line, and what the test prints comes between the dots and the outcome (ok, FAIL, ERROR,
# skipped '<why>', expected failure), which then ends a line of its own.
_UNITTEST_TEST = re.compile(r"^(\w+) \((?:[\w.]*\.)?(\w+)\.\1\)", re.MULTILINE)
_UNITTEST_OUTCOME = re.compile(r"(?:\.\.\. |^)(ok|FAIL|ERROR|skipped|expected failure)\b", re.MULTILINE)
# its report of a failure or error: a line of '=', "FAIL: test_x (module.Class.test_x)", a line of '-', the traceback
_UNITTEST_REPORT = re.compile(r"^(FAIL|ERROR): (\w+) \((?:[\w.]*\.)?(\w+)\.\2\)\n-+\n(.*?)(?=^=+$|^-+$)",
                              re.MULTILINE | re.DOTALL)


def _read_unittest(log: str, result: QaRun) -> None:
    ends = [log.find("\n" + line * 70 + "\n") for line in "=-"]  # (the reports of failures, then the summary)
    summary = min((end for end in ends if end >= 0), default=-1)
    starts = list(_UNITTEST_TEST.finditer(log, 0, summary if summary >= 0 else len(log)))
    for index, match in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else (summary if summary >= 0 else len(log))
        found = _UNITTEST_OUTCOME.findall(log, match.end(), end)
        word = found[-1] if found else "ERROR"  # (none: the run ended inside the test)
        result.outcomes[f"{match.group(2)}::{match.group(1)}"] = {
            "ok": "passed", "FAIL": "failed", "ERROR": "error", "expected failure": "passed"}.get(word, "skipped")
    for _, name, cls, text in _UNITTEST_REPORT.findall(log):
        lines = [line for line in text.strip().splitlines() if line.strip()]
        result.messages[f"{cls}::{name}"] = lines[-1] if lines else ""


def _read_junit(path: Path, result: QaRun) -> None:
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            found = case.find(kind)
            if found is not None:
                outcome = {"failure": "failed"}.get(kind, kind)
                message = found.get("message") or (found.text or "")
                break
        result.outcomes[name] = outcome
        result.messages[name] = message
