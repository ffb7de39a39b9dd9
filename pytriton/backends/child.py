"""The short-lived child processes that import a user's code for the server (`describe`, `autocomplete`)."""

from __future__ import annotations

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


__all__ = ["reap"]
