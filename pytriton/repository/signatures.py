"""What the repository controller compares and lists: a model folder's files (`folder_signature`: a change shows),
the part one version depends on, and the model names of the repositories."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pytriton.repository.folders import model_folders


def version_signature(folder: tuple[Any, ...], version: int) -> tuple[Any, ...]:
    """The part of a `folder_signature` one version depends on: the model's own files (config.pbtxt, labels, ...)
    and its version folder, not the other version folders."""
    prefix = f"{version}{os.sep}"
    return tuple(f for f in folder if f[0].startswith(prefix) or not f[0].split(os.sep)[0].isdigit())


def folder_signature(model_dir: str) -> tuple[Any, ...]:
    """The files of a model folder with their sizes and modification times: it changes when a file does."""
    files = []
    for root, dirs, names in os.walk(model_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = os.path.join(root, name)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            files.append((os.path.relpath(path, model_dir), stat.st_size, stat.st_mtime_ns))
    return tuple(files)


def model_names(folders: Sequence[str], mappings: dict[str, str]) -> tuple[set[str], set[str]]:
    """The model names of the repositories (folder names, or the names mapped to folders), and those found in more
    than one of them."""
    names: set[str] = set()
    duplicates: set[str] = set()
    mapped_dirs = {os.path.normpath(d) for d in mappings.values()}
    for folder in folders:
        try:
            entries = model_folders(folder)
        except OSError:
            continue
        for entry in entries:
            if os.path.normpath(os.path.join(folder, entry)) not in mapped_dirs:
                (duplicates if entry in names else names).add(entry)
    duplicates -= set(mappings)  # a mapped name wins
    return names | set(mappings), duplicates


__all__ = ["folder_signature", "model_names", "version_signature"]
