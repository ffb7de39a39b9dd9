"""Models given as files over the repository extension (`file:` parameters of a load request): written into a
folder of our own, so that no request chooses where a file goes."""

from __future__ import annotations

import os
import shutil
import tempfile

from pytriton.exceptions import invalid_arg


def write_upload(name: str, files: dict[str, str | bytes]) -> tuple[str, str]:
    """(the new temporary folder, the model folder in it holding the uploaded files); a file path that would leave
    the model folder is refused. The caller owns the temporary folder (and removes it, even after an error here)."""
    root = tempfile.mkdtemp(prefix="pytriton-model-")
    model_dir = os.path.join(root, name)
    for relative, content in files.items():
        clean = os.path.normpath(relative)
        if not relative or os.path.isabs(relative) or clean == "." or clean.split(os.sep)[0] == "..":
            raise _refused(root, invalid_arg(f"failed to load '{name}': file path '{relative}' must be relative to "
                                             "the model folder and stay inside it"))
        path = os.path.join(model_dir, clean)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(content if isinstance(content, bytes) else content.encode())
        except (OSError, ValueError) as exc:  # a file where a folder is wanted (or back), a NUL in the path
            raise _refused(root, invalid_arg(f"failed to load '{name}': cannot write file '{relative}' of the model: "
                                             f"{getattr(exc, 'strerror', None) or exc}")) from None
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


def _refused(root: str, error: Exception) -> Exception:
    """`error`, after removing the folder written so far."""
    shutil.rmtree(root, ignore_errors=True)
    return error


__all__ = ["prune_uploads", "write_upload"]
