"""Example models for `pytriton serve`.

    pytriton serve examples.add_sub:add_sub --input INPUT0:int32:16 --input INPUT1:int32:16 \
        --output OUTPUT0:int32:16 --output OUTPUT1:int32:16 --max-batch-size 8
"""

from __future__ import annotations

import numpy as np


def add_sub(requests):
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, per request."""
    return [
        {"OUTPUT0": r["INPUT0"] + r["INPUT1"], "OUTPUT1": r["INPUT0"] - r["INPUT1"]}
        for r in requests
    ]


def double(requests):
    """OUTPUT = 2 * INPUT (any numeric dtype)."""
    # A scalar of the input's dtype keeps the dtype, for numpy inputs and for cupy ones (CUDA shared memory).
    return [{"OUTPUT": r["INPUT"] * r["INPUT"].dtype.type(2)} for r in requests]
