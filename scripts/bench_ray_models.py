"""The models of scripts/bench-ray (importable by the Ray replicas and `pytriton serve`: scripts/ is on their path)."""

from __future__ import annotations

import time

import numpy

from pytriton.decorators import batch


@batch
def sleepy(x: numpy.ndarray) -> dict[str, numpy.ndarray]:
    """y = x after 100 ms per call (a batch of any size takes 100 ms too): a model bound by its own latency."""
    time.sleep(0.1)
    return {"y": x}


@batch
def double(x: numpy.ndarray) -> dict[str, numpy.ndarray]:
    """y = 2x at once: a model that costs nothing, so the serving path is what is measured."""
    return {"y": x * 2}
