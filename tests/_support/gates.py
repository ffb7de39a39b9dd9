"""Hold requests inside a model until the test lets them go: the gated models of tests/models.py (`gated_pid`,
`gated_order`) create the file named by a request's `started` parameter, then wait for the one named by `release`."""

from __future__ import annotations

from pathlib import Path

from tests._support.serving import tensor_args

GATED_PID_ARGS = tensor_args("input", [("X", "int32", "1")]) + tensor_args("output", [("PID", "int64", "1")])
"""`pytriton serve tests.models:gated_pid` options: X INT32 [1] in, the worker's PID INT64 [1] out."""


class Gates:
    """The `started` and `release` files of each request a test holds, in a folder of its own."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.count = 0
        self.releases: list[Path] = []

    def release_all(self) -> None:
        for release in self.releases:
            release.touch()

    def parameters(self) -> tuple[dict[str, str], Path, Path]:
        """A new gate: the request parameters that name it, its `started` file and its `release` file."""
        self.count += 1
        started, release = self.tmp_path / f"started{self.count}", self.tmp_path / f"release{self.count}"
        self.releases.append(release)
        return {"started": str(started), "release": str(release)}, started, release
