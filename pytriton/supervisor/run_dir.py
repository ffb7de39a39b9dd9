"""The server's run directory (`<tmp>/pytriton-<tag>-<pid>-<random>`: the worker socket), the workspace that
`Triton` makes for its server (`<tmp>/pytriton-workspace-<pid>-<random>`), and the start-up sweep of the ones
that processes killed with SIGKILL left behind. `<tmp>` is the temporary directory, or /tmp where that one's path is
too long for the worker socket's (a Unix socket's path holds 107 bytes).

A live server holds an exclusive `flock` on `server.lock` inside its directory for as long as it runs; the kernel
drops the lock when the process dies, however it dies. A directory is stale when its lock can be taken (or, if it
has no lock file, when the pid in its name is gone): only then does the sweep remove it. The lock, not the pid,
is what makes this safe for servers in other pid namespaces that share the same temporary directory.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import shutil
import stat
import tempfile

from pytriton.proxy.arena import pid_alive

logger = logging.getLogger("pytriton.supervisor")

LOCK_NAME = "server.lock"
RUN_DIR_RE = re.compile(r"^pytriton-(?:[0-9a-f]+|workspace)-(\d+)-[A-Za-z0-9_]+$")


# A run directory's longest path inside (`<parent>/pytriton-<tag>-<pid>-<random>/workers.sock`) must fit a Unix
# socket's 107 bytes: a parent longer than this (a deep TMPDIR) is replaced by /tmp
_SOCKET_PATH_MAX = 107
_INSIDE_MAX = len("/pytriton-") + 16 + len("-") + 10 + len("-") + 8 + len("/workers.sock")


def default_parent() -> str:
    """Where run directories go: the temporary directory, or /tmp where its path leaves no room for the socket."""
    parent = tempfile.gettempdir()
    if len(parent.encode()) + _INSIDE_MAX > _SOCKET_PATH_MAX and os.path.isdir("/tmp"):
        return "/tmp"
    return parent


class RunDirectory:
    """A private directory that this process creates, holds locked while it runs, and removes on `remove()`."""

    def __init__(self, tag: str, parent: str | None = None):
        """`tag` is the server's tag (hex) or "workspace"."""
        self.path = tempfile.mkdtemp(prefix=f"pytriton-{tag}-{os.getpid()}-", dir=parent or default_parent())
        # The lock file gets its final name only once it is locked, so a sweep never finds it unlocked while
        # we live; the descriptor is not inherited by workers (Python's default).
        staging = os.path.join(self.path, f".{LOCK_NAME}")
        self._lock_fd: int | None = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(self._lock_fd, f"{os.getpid()}\n".encode())
        os.rename(staging, os.path.join(self.path, LOCK_NAME))

    def remove(self) -> None:
        """Remove the directory and everything in it, then release the lock (idempotent)."""
        if self._lock_fd is None:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._lock_fd)
        self._lock_fd = None

    def __str__(self) -> str:
        return self.path


def _is_stale(path: str, pid: int) -> bool:
    """True when no live server holds this directory's lock (or, without a lock file, its pid is gone)."""
    try:
        fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return not pid_alive(pid)
    except OSError:
        return False  # a symlink, or not ours to read: leave it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False  # a live server holds it
        raise
    finally:
        os.close(fd)  # also releases a lock we got
    return True


def sweep_stale_run_dirs(parent: str | None = None) -> int:
    """Remove run directories of dead servers under `parent` (the temporary directory by default); return how many.

    Only real directories (never symlinks) named like ours and owned by our uid are considered.
    """
    parent = parent or default_parent()
    try:
        entries = os.listdir(parent)
    except OSError:
        return 0
    removed = 0
    uid = os.getuid()
    for name in entries:
        match = RUN_DIR_RE.match(name)
        if match is None:
            continue
        path = os.path.join(parent, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue
        try:
            if not _is_stale(path, int(match.group(1))):
                continue
        except OSError as exc:
            logger.debug("cannot tell whether run directory '%s' is stale: %s", path, exc)
            continue
        shutil.rmtree(path, ignore_errors=True)  # rmtree does not follow symlinks inside the tree
        if not os.path.lexists(path):
            removed += 1
    if removed:
        logger.info("removed %d run director%s left by dead servers", removed, "y" if removed == 1 else "ies")
    return removed
