"""Callables for tests/proxy/test_bigcopy_overlap.py (served by the worker, which imports this module)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np


def shrinking(requests):
    """OUT_X: N float32 ones (N: the `n` parameter). The `truncate` parameter names a /dev/shm object that is cut to
    4096 bytes: `when` "before" the callable returns, or "during" the output's copy (once its first bytes are 1.0)."""
    out = []
    for request in requests:
        n = int(request.parameters["n"])
        path = "/dev/shm/" + str(request.parameters["truncate"]).lstrip("/")
        if request.parameters.get("when") == "before":
            os.truncate(path, 4096)
        else:
            def cut() -> None:
                fd = os.open(path, os.O_RDWR)
                try:
                    deadline = time.monotonic() + 10
                    while os.pread(fd, 4, 0) != np.float32(1).tobytes() and time.monotonic() < deadline:
                        pass
                    os.ftruncate(fd, 4096)
                finally:
                    os.close(fd)

            threading.Thread(target=cut, daemon=True).start()
        out.append({"OUT_X": np.ones(n, dtype=np.float32)})
    return out


def big_then_raise(requests):
    """Decoupled: two responses of BIG (16 MiB float32, values 1 then 2) per request, then it raises."""
    for step in (1, 2):
        yield [{"BIG": np.full(4 << 20, step, dtype=np.float32)} for _ in requests]
    raise ValueError("failed after its large responses")
