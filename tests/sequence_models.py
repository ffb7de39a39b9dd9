"""Callables for the sequence batcher's CLI and bind tests: a running sum per correlation id, reset by START."""

from __future__ import annotations

import numpy as np

SUMS: dict = {}


def running_sum(requests):
    """INPUT (int32 [1]) added to the sequence's sum (START resets it); echoes START and CORRID as delivered, and
    the request's correlation_id attribute."""
    answers = []
    for request in requests:
        corrid = request["CORRID"].reshape(-1)[0]
        key = corrid.decode() if isinstance(corrid, bytes) else int(corrid)
        if bool(request["START"].reshape(-1)[0]):
            SUMS[key] = 0
        SUMS[key] = SUMS.get(key, 0) + int(request["INPUT"].reshape(-1)[0])
        answers.append({"SUM": np.array([[SUMS[key]]], dtype=np.int32),
                        "OUT_START": request["START"].reshape(1, 1).astype(np.int32),
                        "CORRELATION_ID": np.array([[str(request.correlation_id)]], dtype=np.bytes_)})
    return answers


def state_sum(requests):
    """A sum kept by the server (implicit state): SUM = SUM_STATE = STATE_IN + INPUT."""
    answers = []
    for request in requests:
        total = (request["STATE_IN"].reshape(1, 1) + request["INPUT"].reshape(1, 1)).astype(np.int32)
        answers.append({"SUM": total, "STATE_OUT": total})
    return answers
