"""The processes this test run started: the session fixture (tests/conftest.py) checks none outlives it."""

from __future__ import annotations

import os
import signal
from typing import Iterable, Iterator

from tests._support.waits import holds_within


def process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot), None when there is no such process: gone, a zombie (gone
    for our purposes), or `pid` the id of a thread (/proc shows threads too, and kill() on a thread's id signals its
    whole process). A pid and its start time name one process: a pid is reused, not within the same tick."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # (from the 3rd field on: the name may hold anything)
        with open(f"/proc/{pid}/status") as f:
            tgid = next(int(line.split()[1]) for line in f if line.startswith("Tgid:"))
    except (FileNotFoundError, ProcessLookupError, StopIteration):  # (gone between the looks: ESRCH)
        return None
    if fields[0] == "Z" or tgid != pid:
        return None
    return int(fields[19])  # the 22nd field: starttime


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as gone; a thread's id is not a process)."""
    return process_start(pid) is not None


class StartedProcesses:
    """The processes the tests started (servers, their workers, user programs): by pid (their shared-memory segments
    are named after it) and by pid and start time, what the session's end waits for and kills — once a process is
    gone its pid goes to the next process or thread anyone starts, which is not ours to wait for or kill."""

    def __init__(self) -> None:
        self._pids: set[int] = set()
        self._known: set[tuple[int, int]] = set()

    def add(self, pid: int) -> None:
        self._pids.add(pid)
        start = process_start(pid)
        if start is not None:  # (gone already, or not a process: nothing to wait for)
            self._known.add((pid, start))

    def update(self, pids: Iterable[int]) -> None:
        for pid in pids:
            self.add(pid)

    def __contains__(self, pid: object) -> bool:
        return pid in self._pids

    def __iter__(self) -> Iterator[int]:
        return iter(set(self._pids))

    def alive(self) -> list[int]:
        """Those still running (as the same processes)."""
        return sorted(pid for pid, start in self._known if process_start(pid) == start)

    def kill_alive(self) -> None:
        """SIGKILL those still running: through a pidfd, which names the process it was opened for whatever happens
        to its pid after, once it is checked to be the same process."""
        for pid, start in list(self._known):
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:  # gone
                continue
            try:
                if process_start(pid) == start:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(pidfd)


started_pids = StartedProcesses()
"""Every process a test started, directly or through a server (its workers); add the ones you start yourself."""


def alive_after(pids: Iterable[int], timeout_s: float = 10.0) -> list[int]:
    """Wait up to `timeout_s` for every one of `pids` to end; the ones still alive then (none: all gone)."""
    pids = list(pids)
    holds_within(lambda: not any(pid_alive(p) for p in pids), timeout_s)
    return [p for p in pids if pid_alive(p)]
