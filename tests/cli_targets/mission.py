"""The module of the mission's command, `pytriton serve mymod:infer_fn --instances 2 --gpus 0,1`: it declares its
tensors, batching and device next to the callable; the callable answers with the GPU its worker was pinned to."""

from __future__ import annotations

import os

import numpy as np

from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor, triton_model


@triton_model(
    inputs=[Tensor(name="IN_X", dtype=np.int8, shape=(1,))],
    outputs=[Tensor(name="DEVICES", dtype=bytes, shape=(1,))],
    config=ModelConfig(max_batch_size=8, batcher=DynamicBatcher()),
    device="gpu",
)
@batch
def infer_fn(IN_X):
    """CUDA_VISIBLE_DEVICES of this worker, once per row of the batch."""
    pinned = os.environ.get("CUDA_VISIBLE_DEVICES", "").encode()
    return {"DEVICES": np.array([[pinned]] * len(IN_X), dtype=object)}
