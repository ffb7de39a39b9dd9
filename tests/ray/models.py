"""Callables the Ray tests serve (imported by the replicas: the repository root is on their PYTHONPATH)."""

from __future__ import annotations

import time

import numpy

from pytriton.decorators import batch


def _add(x: numpy.ndarray) -> dict[str, numpy.ndarray]:
    import ray

    node = ray.get_runtime_context().get_node_id().encode()
    return {"y": x + 1, "node": numpy.array([[node]] * len(x), dtype=object)}


@batch
def add_one(x: numpy.ndarray) -> dict[str, numpy.ndarray]:
    """y = x + 1, and the id of the node the replica runs on (one per row)."""
    return _add(x)


@batch
def slow_add_one(x: numpy.ndarray) -> dict[str, numpy.ndarray]:
    """y = x + 1 after 200 ms, and the node."""
    time.sleep(0.2)
    return _add(x)
