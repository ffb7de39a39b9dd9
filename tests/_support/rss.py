"""Resident memory of a server process and its workers, for the memory-bound checks of the slow suites."""

from __future__ import annotations

import os


def rss_bytes(pid: int) -> int:
    """Resident set size of one process (VmRSS), 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        return 0
    return 0


def children(pid: int) -> list[int]:
    """Direct children of a process (the server's workers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def descendants(pid: int) -> list[int]:
    """Every process below `pid`: the server's workers, forked by its worker template, are its grandchildren."""
    found, todo = [], [pid]
    while todo:
        below = children(todo.pop())
        found += below
        todo += below
    return found


def pss_bytes(pid: int) -> int:
    """Proportional set size of one process (each shared page counted once among the processes that map it), 0 if
    it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return 0


def tree_pss_bytes(pid: int) -> int:
    """PSS of a process and every process below it (a server, its worker template and its workers)."""
    return pss_bytes(pid) + sum(pss_bytes(p) for p in descendants(pid))


def tree_rss_bytes(pid: int) -> int:
    """RSS of a server process plus its worker processes."""
    return rss_bytes(pid) + sum(rss_bytes(p) for p in descendants(pid))
