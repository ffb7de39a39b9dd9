"""Example models for `pytriton serve`.

`add_sub` declares its model next to it, so it is served as is (`scripts/demo` does this):

    pytriton serve examples.add_sub:add_sub

`double` declares nothing: its tensors are given on the command line:

    pytriton serve examples.add_sub:double --input INPUT:fp32:-1 --output OUTPUT:fp32:-1
"""

from __future__ import annotations

import numpy as np

from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor, triton_model


@triton_model(
    inputs=[Tensor(name="INPUT0", dtype=np.int32, shape=(16,)), Tensor(name="INPUT1", dtype=np.int32, shape=(16,))],
    outputs=[Tensor(name="OUTPUT0", dtype=np.int32, shape=(16,)), Tensor(name="OUTPUT1", dtype=np.int32, shape=(16,))],
    config=ModelConfig(max_batch_size=8, batcher=DynamicBatcher()),
)
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
