"""Reading a target's declaration in a child process: the user's traceback when the import fails, a line while a slow
import runs, the child dying with `pytriton serve`, and a module that forks at import not holding the start up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import types

from click.testing import CliRunner

from pytriton.backends.target import CallableTarget
from pytriton.cli import model as _cli_model
from pytriton.cli.serve import main
from tests._support.paths import REPO
from tests._support.ports import LOCAL_PORTS
from tests._support.processes import pid_alive, started_pids


def _serve_to_the_end(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytriton.cli", "serve", *args, *LOCAL_PORTS]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, **(env or {})))


def test_an_import_error_shows_the_users_traceback_once():
    result = CliRunner().invoke(main, ["serve", "tests.cli_targets.deepimp:infer_fn", *LOCAL_PORTS])
    assert result.exit_code == 1
    text = result.output
    assert "Error: cannot load inference callable 'tests.cli_targets.deepimp:infer_fn': JSONDecodeError:" in text
    assert text.count("Traceback (most recent call last):") == 1
    assert 'tests/cli_targets/deepimp.py", line 10, in <module>' in text
    assert 'tests/cli_targets/deepimp.py", line 7, in _load_settings' in text
    assert "importlib" not in text and "pytriton/backends" not in text  # the user's frames only


def test_an_exception_in_init_is_logged_by_the_worker_with_its_traceback():
    process = _serve_to_the_end("tests.cli_targets.declared:FailsToStart")
    assert process.returncode == 1
    log = process.stderr
    assert "cannot load inference callable 'tests.cli_targets.declared:FailsToStart': RuntimeError: the weights" in log
    assert log.count("Traceback (most recent call last):") == 1, log
    assert 'tests/cli_targets/declared.py", line 84, in __init__' in log


def test_a_slow_import_says_what_is_going_on(monkeypatch):
    monkeypatch.setattr(_cli_model, "NOTICE_AFTER_S", 0.2)
    monkeypatch.setenv("PYTRITON_TEST_IMPORT_SECONDS", "1.5")
    result = CliRunner().invoke(main, ["serve", "tests.cli_targets.slow_import:infer_fn", *LOCAL_PORTS])
    assert result.exit_code == 2  # it declares nothing: the usual message, after the notice
    assert "importing tests.cli_targets.slow_import to read its model declaration (still running after 0.2 s" in \
        result.output
    assert "declares no outputs" in result.output


def test_the_describe_process_is_waited_for_without_polling(monkeypatch):
    """The start goes on the moment the describe process exits: not through Popen.wait's polling with a timeout, which
    sleeps up to 50 ms between looks (a delay every server start paid)."""
    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"slept {seconds} s waiting for the describe process")

    monkeypatch.setattr(subprocess, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=no_sleep))
    description = _cli_model.describe_target(CallableTarget.parse("examples.add_sub:add_sub"))
    assert description.declaration is not None and description.kind == "function"


def test_the_describe_process_dies_with_pytriton_serve(tmp_path):
    pid_file = tmp_path / "pid"
    env = dict(os.environ, PYTRITON_TEST_IMPORT_SECONDS="60", PYTRITON_TEST_PID_FILE=str(pid_file))
    serve = subprocess.Popen([sys.executable, "-m", "pytriton.cli", "serve", "tests.cli_targets.slow_import:infer_fn",
                              *LOCAL_PORTS], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started_pids.add(serve.pid)
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pid_file.read_text())
        started_pids.add(child)
        serve.send_signal(signal.SIGTERM)
        serve.wait(10)
        deadline = time.monotonic() + 10
        while pid_alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(child), "the process that imports the target outlived pytriton serve"
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()


def test_a_module_that_forks_at_import_does_not_hold_the_start(tmp_path):
    pid_file, log = tmp_path / "pid", tmp_path / "log"
    started = time.monotonic()
    with open(log, "w") as stderr:  # a file, not a pipe: the forked process holds what it inherited
        serve = subprocess.Popen([sys.executable, "-m", "pytriton.cli", "serve", "tests.cli_targets.forks:infer_fn",
                                  *LOCAL_PORTS], cwd=REPO, env=dict(os.environ, PYTRITON_TEST_PID_FILE=str(pid_file)),
                                 stdout=subprocess.DEVNULL, stderr=stderr)
        started_pids.add(serve.pid)
        code = serve.wait(60)
    elapsed = time.monotonic() - started
    forked = int(pid_file.read_text())
    try:
        assert code == 2 and "declares no outputs" in log.read_text()  # it answered
        assert elapsed < 30  # not the 60 s the forked process lives
    finally:
        if pid_alive(forked):
            os.kill(forked, signal.SIGKILL)
