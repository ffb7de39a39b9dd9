"""`pytriton serve` run to its end (a start that fails, a usage error) on add_sub, every port on loopback."""

from __future__ import annotations

import subprocess
import sys

from tests._support.paths import REPO


def serve_to_end(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytriton.cli", "serve", "tests.models:add_sub", "--input", "INPUT0:int32:16",
               "--input", "INPUT1:int32:16", "--output", "OUTPUT0:int32:16", "--output", "OUTPUT1:int32:16",
               "--no-allow-metrics", *args]
    for service in ("grpc", "http"):
        command += [f"--{service}-port", "0", f"--{service}-address", "127.0.0.1"]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
