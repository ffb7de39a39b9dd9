"""Run directories: a live server's is never swept, a dead one's is (after SIGKILL), only ours, never through links."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from pytriton.supervisor.run_dir import LOCK_NAME, RunDirectory, sweep_stale_run_dirs
from tests._support.paths import REPO
from tests._support.processes import alive_after
from tests._support.serving import ServerProcess, serve, tensor_args

HOLDER = """
import sys, time
from pytriton.supervisor.run_dir import RunDirectory
directory = RunDirectory(sys.argv[1], parent=sys.argv[2])
print(directory.path, flush=True)
time.sleep(600)
"""


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture
def holder(tmp_path):
    """A process that holds a run directory in tmp_path until killed."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, "ab12cd34", str(tmp_path)], cwd=REPO,
                               stdout=subprocess.PIPE, text=True)
    path = process.stdout.readline().strip()
    yield process, path
    if process.poll() is None:
        process.kill()
    process.wait()
    process.stdout.close()


def test_a_live_holders_directory_is_kept_and_swept_once_it_is_killed(tmp_path, holder):
    process, path = holder
    assert os.path.isfile(os.path.join(path, LOCK_NAME))
    assert sweep_stale_run_dirs(str(tmp_path)) == 0
    assert os.path.isdir(path)
    process.kill()
    process.wait()
    assert sweep_stale_run_dirs(str(tmp_path)) == 1
    assert not os.path.exists(path)


def test_a_directory_of_this_process_is_kept_until_removed(tmp_path):
    directory = RunDirectory("0f0f0f0f", parent=str(tmp_path))
    assert os.path.basename(directory.path).startswith(f"pytriton-0f0f0f0f-{os.getpid()}-")
    assert sweep_stale_run_dirs(str(tmp_path)) == 0  # our own lock is held through another descriptor
    assert os.path.isdir(directory.path)
    directory.remove()
    directory.remove()
    assert not os.path.exists(directory.path)


def test_lock_less_directories_go_by_the_pid_in_their_name(tmp_path):
    dead = tmp_path / f"pytriton-abcdef01-{_dead_pid()}-x1y2z3"
    alive = tmp_path / f"pytriton-abcdef01-{os.getpid()}-x1y2z3"
    workspace = tmp_path / f"pytriton-workspace-{_dead_pid()}-q9w8e7"
    for directory in (dead, alive, workspace):
        directory.mkdir()
        (directory / "workers.sock").write_bytes(b"")
    assert sweep_stale_run_dirs(str(tmp_path)) == 2
    assert not dead.exists() and not workspace.exists()
    assert alive.is_dir()


def test_only_our_directories_are_swept_and_links_are_not_followed(tmp_path):
    dead_pid = _dead_pid()
    foreign = [tmp_path / f"pytriton-{dead_pid}", tmp_path / f"other-abcdef01-{dead_pid}-x1y2z3",
               tmp_path / f"pytriton-NOTHEX-{dead_pid}-x1y2z3"]
    for directory in foreign:
        directory.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    link = tmp_path / f"pytriton-abcdef01-{dead_pid}-linked"
    link.symlink_to(victim, target_is_directory=True)
    plain_file = tmp_path / f"pytriton-abcdef01-{dead_pid}-afile1"
    plain_file.write_text("not a directory")
    # a stale directory that holds a link to the victim: the link goes, the victim stays
    stale = tmp_path / f"pytriton-abcdef01-{dead_pid}-inside"
    stale.mkdir()
    (stale / "escape").symlink_to(victim, target_is_directory=True)
    if os.getuid() == 0:  # another user's directory (only root can make one here)
        theirs = tmp_path / f"pytriton-abcdef01-{dead_pid}-theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        foreign.append(theirs)
    assert sweep_stale_run_dirs(str(tmp_path)) == 1
    assert not stale.exists()
    assert all(d.is_dir() for d in foreign)
    assert link.is_symlink() and plain_file.is_file()
    assert (victim / "precious").read_text() == "keep me"


@pytest.fixture
def short_tmp():
    """A temporary folder with a short path (pytest's tmp_path is too deep for a run directory's socket)."""
    path = tempfile.mkdtemp(prefix="rd", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_server_killed_with_sigkill_has_its_run_dir_swept_by_the_next_server(short_tmp):
    # Both servers keep their run directories in a temporary folder of their own (TMPDIR): servers that other test
    # processes start meanwhile sweep only their own (the default) one.
    tmp_path = short_tmp
    env = {"TMPDIR": tmp_path}
    args = tensor_args("input", [("INPUT", "fp32", "4")]) + tensor_args("output", [("PID", "int64", "1")])
    server = ServerProcess(["tests.models:slow_pid", *args], env=env)
    pid = server.process.pid
    try:
        (run_dir,) = glob.glob(os.path.join(tmp_path, f"pytriton-*-{pid}-*"))
        assert os.path.exists(os.path.join(run_dir, "workers.sock"))
        workers = server.worker_pids()
    finally:
        server.stop(signal.SIGKILL)
    alive_after(workers, 10.0)
    assert os.path.isdir(run_dir)  # a SIGKILLed server cannot clean up ...
    with serve("tests.models:slow_pid", *args, env=env) as second:
        assert not os.path.exists(run_dir)  # ... the next one sweeps it
        (own,) = glob.glob(os.path.join(tmp_path, f"pytriton-*-{second.process.pid}-*"))
    assert not os.path.exists(own)  # a graceful stop removes its own
