"""The short-lived child processes that import a user's code for the server (`describe`, `autocomplete`)."""

from __future__ import annotations

import os
import select
import subprocess


def reap(process: subprocess.Popen[bytes]) -> None:
    """Make sure `process` has ended: a child still running (its parent was interrupted while waiting) is terminated,
    then killed if it does not exit within 5 s, and waited for."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for_exit(process: subprocess.Popen[bytes], timeout_s: float) -> int:
    """`process.wait(timeout_s)` that returns as soon as the process exits: Popen.wait with a timeout polls, sleeping
    up to 50 ms between looks, a delay every server start would pay. Linux: the exit seen through a pidfd; elsewhere
    (no pidfd_open) Popen's polling."""
    if process.returncode is not None:  # reaped already: its pid may be another process's by now
        return process.returncode
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux, or an old kernel
        return process.wait(timeout=timeout_s)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(max(0, int(timeout_s * 1000))):
            raise subprocess.TimeoutExpired(process.args, timeout_s)
    finally:
        os.close(pidfd)
    return process.wait()


__all__ = ["reap", "wait_for_exit"]
