"""Bounds on what a load request of the repository extension may carry: its configuration override (size and JSON
nesting depth) and, where the server allows uploads, its files (count, total size, path length and depth). The
front-ends bound a load request's message or body by `max_request_bytes` before they read it. A light module (settings
data only), so that a process that builds a server's configuration does not load the repository code for it."""

from __future__ import annotations

import dataclasses

# Room in a load request beside its configuration and files: the model name, parameter names, framing.
REQUEST_HEADROOM = 64 * 1024
# A file path's length in bytes as Linux bounds a whole path (PATH_MAX 4096) is far more than a model needs.
MAX_PATH_BYTES = 1024
MAX_PATH_DEPTH = 32  # folders in a file path of an upload (a 1,500-deep one used to exhaust the recursion limit)


@dataclasses.dataclass(frozen=True)
class RepositoryLimits:
    """Bounds on one load request.

    Attributes:
        max_config_bytes: the `config` parameter (a model configuration in JSON), in bytes.
        max_config_depth: how deeply that JSON may nest objects and arrays (Triton's deepest field, an ensemble
            step's map or a sequence batcher's initial state, nests fewer than 8).
        max_upload_bytes: the `file:` parameters' contents, all files together.
        max_upload_files: how many `file:` parameters one load may give.
    """

    max_config_bytes: int = 1 << 20
    max_config_depth: int = 32
    max_upload_bytes: int = 64 << 20
    max_upload_files: int = 1000

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if getattr(self, field.name) < 1:
                raise ValueError(f"{field.name} {getattr(self, field.name)}: must be at least 1")

    def max_request_bytes(self, uploads: bool, http: bool = False) -> int:
        """The largest load request worth reading: its configuration, its files with their paths when `uploads` are
        allowed, and some headroom. `http`: as an HTTP body, where the configuration is a JSON string (each quote
        escaped: counted twice) and the files are base64 (4/3 larger)."""
        size = self.max_config_bytes * (2 if http else 1) + REQUEST_HEADROOM
        if uploads:
            size += self.max_upload_bytes * 4 // 3 if http else self.max_upload_bytes
            size += self.max_upload_files * (MAX_PATH_BYTES + 64)
        return size


__all__ = ["MAX_PATH_BYTES", "MAX_PATH_DEPTH", "REQUEST_HEADROOM", "RepositoryLimits"]
