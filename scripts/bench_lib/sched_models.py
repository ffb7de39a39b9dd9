"""The scheduling suite's models (scripts/bench --suite scheduling), importable under both venvs.

* ``spin``: CPU-bound pure Python: SPIN_ITERATIONS turns of a Python loop per request (about 2 ms of
  GIL-holding work on the machine the bench was written on; the report states the loop, not a time, so that both
  servers get exactly the same work), y = x.
* ``accumulate``: a stateful model: per correlation id (CONTROL_SEQUENCE_CORRID), the running sum of the
  inputs since the sequence's START. Without control inputs (the same model served without sequence batching)
  it does the same per-request work on one running sum (correlation id 0), so that the two rows differ only in
  the scheduler.
* ``double``: y = 2x (the response-cache rows).

Each callable takes the batch as ``@batch`` gives it (the bench serves them with a max_batch_size).
"""

from __future__ import annotations

import numpy as np

from pytriton.decorators import batch

SPIN_ITERATIONS = 60_000
_state: dict[int, np.ndarray] = {}


def _spin_once() -> int:
    x = 0
    for i in range(SPIN_ITERATIONS):
        x += i
    return x


def spin_batch(INPUT):
    for _ in range(len(INPUT)):  # the work is per request
        _spin_once()
    return {"OUTPUT": INPUT}


def accumulate_batch(INPUT, START=None, READY=None, CORRID=None):
    n = len(INPUT)
    if CORRID is None:  # served without sequence batching: the same per-request work on one running sum (id 0)
        CORRID = np.zeros((n, 1), np.uint64)
    out = np.empty_like(INPUT)
    for i in range(n):
        if READY is not None and not READY[i].any():
            out[i] = 0
            continue
        cid = int(CORRID[i].reshape(-1)[0])
        if START is not None and START[i].any():
            _state[cid] = np.zeros_like(INPUT[i])
        total = _state.get(cid, np.zeros_like(INPUT[i])) + INPUT[i]
        _state[cid] = total
        out[i] = total
    return {"OUTPUT": out}


def double_batch(INPUT):
    return {"OUTPUT": INPUT * np.float32(2)}


spin = batch(spin_batch)
accumulate = batch(accumulate_batch)
double = batch(double_batch)
