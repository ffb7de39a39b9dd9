"""What the session's `nothing_left_behind` check takes for a process the tests started (tests/_support/processes.py): a
pid is given to the next process or thread once its process is gone, and on Linux kill() on a thread's id signals the
thread's whole process. Taken for ours, such a pid made the check wait 10 s and then SIGKILL its holder: another
program on the machine, or the test run itself (a pytest-xdist worker "crashed while running" its last test)."""

from __future__ import annotations

import subprocess
import sys
import threading

from tests._support.processes import StartedProcesses, pid_alive, process_start


def _a_live_thread() -> tuple[int, threading.Event]:
    """The id of a thread of this process that runs until the event is set."""
    ready, stop = threading.Event(), threading.Event()
    ids: list[int] = []

    def run() -> None:
        ids.append(threading.get_native_id())
        ready.set()
        stop.wait(60)

    threading.Thread(target=run, daemon=True).start()
    assert ready.wait(10)
    return ids[0], stop


def test_the_id_of_a_live_thread_is_not_a_live_process():
    tid, stop = _a_live_thread()
    try:
        assert not pid_alive(tid)  # (kill(tid, 0) succeeds, and /proc/<tid>/stat is there)
        started = StartedProcesses()
        started.add(tid)  # as if a server's pid had been given to this thread
        assert started.alive() == []
    finally:
        stop.set()


def test_a_process_is_known_by_its_pid_and_its_start_time():
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        started = StartedProcesses()
        started.add(process.pid)
        assert started.alive() == [process.pid] and process.pid in started and list(started) == [process.pid]
        # the same pid, recorded for a process that started at another time: the one there now is not ours
        reused = StartedProcesses()
        reused._known.add((process.pid, process_start(process.pid) - 1))
        assert reused.alive() == []
    finally:
        process.communicate(b"")
    assert started.alive() == [] and not pid_alive(process.pid)
    assert process.pid in started  # (still named: the /dev/shm check looks for segments it left)


def test_a_pid_recorded_after_its_process_ended_is_never_taken_for_a_live_one():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    started = StartedProcesses()
    started.add(process.pid)  # (gone: whatever holds this pid later is not ours)
    assert started.alive() == [] and process.pid in started
