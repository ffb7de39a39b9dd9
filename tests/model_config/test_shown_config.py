"""What a configuration shows its clients and its Python models (`TritonModelConfig.as_triton_shows`), as
tritonserver 2.51 fills it in when it loads one; the scheduler still goes by the config as given
(tests/e2e/test_triton_parity_configs.py compares whole repositories with the real server)."""

from __future__ import annotations

from pytriton.model_config.common import DynamicBatcher
from pytriton.model_config.sequence import SequenceBatcher, sequence_batcher_from_triton
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig


def _config(**fields) -> TritonModelConfig:
    return TritonModelConfig(model_name="m", inputs=[TensorSpec("X", "FP32", (1,))],
                             outputs=[TensorSpec("Y", "FP32", (1,))], **fields)


def test_a_dynamic_batcher_without_preferred_sizes_is_shown_preferring_the_max_batch_size():
    config = _config(max_batch_size=8, batcher=DynamicBatcher())
    assert config.as_triton_shows()["dynamic_batching"]["preferred_batch_size"] == [8]
    assert config.to_triton_dict()["dynamic_batching"]["preferred_batch_size"] == []  # (what the scheduler goes by)
    given = _config(max_batch_size=8, batcher=DynamicBatcher(preferred_batch_size=[2, 4]))
    assert given.as_triton_shows()["dynamic_batching"]["preferred_batch_size"] == [2, 4]


def test_a_sequence_strategy_is_shown_when_the_config_names_it():
    unnamed = sequence_batcher_from_triton({"max_sequence_idle_microseconds": 1000})
    named = sequence_batcher_from_triton({"max_sequence_idle_microseconds": 1000, "direct": {}})
    assert "direct" not in unnamed.to_triton_dict() and "direct" in named.to_triton_dict()
    assert unnamed.strategy == named.strategy  # (Direct either way)
    assert "direct" in SequenceBatcher().to_triton_dict()  # (a bound model's: it names it)
