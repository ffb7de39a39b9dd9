"""The model folders of a repository: its sub-folders, except hidden ones and those whose names are no model names
(Triton's rules, and no control characters: `pytriton.model_config.names`); such a folder is skipped and the log says
so once."""

from __future__ import annotations

import logging
import os
import threading

from pytriton.model_config.names import model_name_problem, shown

logger = logging.getLogger("pytriton.repository")
_said: set[str] = set()  # the skipped folders already logged (a poll rescans every few seconds)
_said_lock = threading.Lock()  # (scans run in the event loop and in load threads)


def model_folders(folder: str) -> list[str]:
    """The names of the model folders of repository `folder`, sorted; OSError if it cannot be listed."""
    found = []
    for entry in sorted(os.listdir(folder)):
        if entry.startswith(".") or not os.path.isdir(os.path.join(folder, entry)):
            continue
        problem = model_name_problem(entry)
        if problem is not None:
            path = os.path.join(folder, entry)
            with _said_lock:
                first = path not in _said
                _said.add(path)
            if first:
                logger.warning("model folder '%s' in model repository '%s' skipped: %s", shown(entry), folder, problem)
            continue
        found.append(entry)
    return found


__all__ = ["model_folders"]
