"""`ModelConfig`: the model options a PyTriton user passes to `Triton.bind`."""

from __future__ import annotations

import dataclasses

from pytriton.model_config.common import DynamicBatcher
from pytriton.model_config.sequence import SequenceBatcher


@dataclasses.dataclass
class ModelConfig:
    """Batching, batcher, response cache and decoupled (streaming) settings of a bound model.

    `sequence_batcher` is a pytriton extension (PyTriton's ModelConfig has none): a stateful model served with
    Triton's sequence batcher in place of the dynamic batcher (see `SequenceBatcher`)."""

    batching: bool = True
    max_batch_size: int = 4
    batcher: DynamicBatcher = dataclasses.field(default_factory=DynamicBatcher)
    response_cache: bool = False
    decoupled: bool = False
    sequence_batcher: SequenceBatcher | None = None
