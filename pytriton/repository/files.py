"""The files a model's configuration names (its model file, its label files, its initial states' data files) stay in
the model's folder, whoever wrote the configuration: a repository's `config.pbtxt` or a load request's override.

A name must be relative and without a '..' part; the file it leads to, symbolic links resolved, must lie in the
model's folder (where that folder really is) or elsewhere in the repository that holds the model (a model file linked
to another model's, as administrators lay repositories out). Nothing else on the host can be run or read this way."""

from __future__ import annotations

import os


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def model_file(model_dir: str, name: str, under: str = "") -> str | None:
    """The path of file `name` of the model in `model_dir` (relative to its subfolder `under`, e.g. a version
    folder), or None when it would lead out of the model's folder (see the module's text)."""
    if not name or "\0" in name or os.path.isabs(name) or ".." in name.split(os.sep):
        return None
    model_dir = os.path.abspath(model_dir)
    path = os.path.join(model_dir, under, name)
    real = os.path.realpath(path)
    if _inside(real, os.path.realpath(model_dir)) or _inside(real, os.path.realpath(os.path.dirname(model_dir))):
        return path
    return None


def outside(kind: str, name: str, model: str, what: str = "") -> str:
    """Triton's wording for a file that leads out of the model's folder (`what`: e.g. " for output 'Y'")."""
    return f"{kind} file path '{name}'{what} in model '{model}' is outside model directory"


__all__ = ["model_file", "outside"]
