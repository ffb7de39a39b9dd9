"""Our POSIX shared-memory segments in /dev/shm (named pytriton_<tag>_<pid>_...)."""

from __future__ import annotations

import os
import re


def shm_segments_of(pids: set[int]) -> list[str]:
    """Our shared-memory segments (pytriton_<tag>_<pid>_...) owned by one of `pids`."""
    found = []
    for entry in os.listdir("/dev/shm"):
        match = re.match(r"^pytriton_[0-9a-f]+_(\d+)_", entry)
        if match and int(match.group(1)) in pids:
            found.append(entry)
    return found
