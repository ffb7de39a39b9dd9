"""Models given as files over the repository extension (`file:` parameters of a load request): written into a
folder of our own, so that no request chooses where a file goes. The files are checked against the upload's bounds
(`RepositoryLimits`) before anything is written; whatever goes wrong while writing, the folder is removed."""

from __future__ import annotations

import os
import shutil
import tempfile

from pytriton.config.repository_limits import MAX_PATH_BYTES, MAX_PATH_DEPTH, RepositoryLimits
from pytriton.exceptions import invalid_arg
from pytriton.model_config.names import shown


def check_upload(name: str, files: dict[str, str | bytes], limits: RepositoryLimits) -> None:
    """INVALID_ARG naming the model and the file unless `files` (path -> content) fit the bounds and every path stays
    inside the model folder."""
    if len(files) > limits.max_upload_files:
        raise invalid_arg(f"failed to load '{name}': {len(files)} files given ('file:' parameters), more than the "
                          f"limit of {limits.max_upload_files}")
    total = 0
    for relative, content in files.items():
        clean = os.path.normpath(relative)
        quoted = shown(relative if len(relative) <= 128 else relative[:128] + "...")
        if not relative or os.path.isabs(relative) or clean == "." or clean.split(os.sep)[0] == "..":
            raise invalid_arg(f"failed to load '{name}': file path '{quoted}' must be relative to the model folder "
                              "and stay inside it")
        depth = clean.count(os.sep)
        if depth > MAX_PATH_DEPTH:
            raise invalid_arg(f"failed to load '{name}': file path '{quoted}' is {depth} folders deep, more than the "
                              f"limit of {MAX_PATH_DEPTH}")
        length = len(relative.encode("utf-8", "surrogatepass"))
        if length > MAX_PATH_BYTES:
            raise invalid_arg(f"failed to load '{name}': file path '{quoted}' is {length} bytes long, more than the "
                              f"limit of {MAX_PATH_BYTES}")
        if not isinstance(content, (bytes, str)):  # (Triton's wording; a gRPC client may send an int64 or a bool)
            raise invalid_arg(f"failed to load '{name}': File parameter 'file:{quoted}' must have bytes type for its "
                              "value")
        total += len(content)
    if total > limits.max_upload_bytes:
        raise invalid_arg(f"failed to load '{name}': the files given hold {total} bytes, more than the limit of "
                          f"{limits.max_upload_bytes}")


def write_upload(name: str, files: dict[str, str | bytes], limits: RepositoryLimits | None = None,
                 parent: str | None = None) -> tuple[str, str]:
    """(the new temporary folder, the model folder in it holding the uploaded files); files out of bounds or a path
    that would leave the model folder are refused (`check_upload`) before the folder is made. The folder is made in
    `parent` (the server's run directory, which the next start's sweep removes after a SIGKILL; default: the
    temporary directory). The caller owns the folder once this returns; if this raises, whatever the error, the
    folder is gone."""
    check_upload(name, files, limits or RepositoryLimits())
    root = tempfile.mkdtemp(prefix="pytriton-model-", dir=parent)
    try:
        model_dir = os.path.join(root, name)
        for relative, content in files.items():
            path = os.path.join(model_dir, os.path.normpath(relative))
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(content if isinstance(content, bytes) else content.encode())
            except (OSError, ValueError) as exc:  # a file where a folder is wanted (or back), a NUL in the path
                quoted = shown(relative if len(relative) <= 128 else relative[:128] + "...")
                raise invalid_arg(f"failed to load '{name}': cannot write file '{quoted}' of the model: "
                                  f"{getattr(exc, 'strerror', None) or exc}") from None
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return root, model_dir


def prune_uploads(roots: list[str], loading: set[str], targets: list[str]) -> list[str]:
    """`roots` (folders `write_upload` made) less those removed now: the ones that no model served runs from (`targets`:
    the served models' workers' targets, which name their files) and no load under way (`loading`) reads — a reload
    replaced it, its load failed, it was unloaded. As in Triton, such a folder lives as long as the model loaded
    from it."""
    kept = []
    for root in roots:
        if root in loading or any(root + os.sep in target for target in targets):
            kept.append(root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    return kept


__all__ = ["check_upload", "prune_uploads", "write_upload"]
