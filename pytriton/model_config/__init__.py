"""Model configuration: what `Triton.bind` and `@triton_model` take (ModelConfig, Tensor, ...) and the server's model
description."""

from pytriton.model_config.common import DeviceKind, DynamicBatcher, QueuePolicy, TimeoutAction
from pytriton.model_config.declaration import ModelDeclaration, declaration_of, triton_model
from pytriton.model_config.model_config import ModelConfig
from pytriton.model_config.sequence import (
    ControlKind,
    SequenceBatcher,
    SequenceControl,
    SequenceState,
    SequenceStrategy,
)
from pytriton.model_config.tensor import Tensor
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig

__all__ = [
    "ModelConfig",
    "Tensor",
    "DeviceKind",
    "DynamicBatcher",
    "QueuePolicy",
    "TimeoutAction",
    "SequenceBatcher",
    "SequenceControl",
    "SequenceState",
    "SequenceStrategy",
    "ControlKind",
    "TensorSpec",
    "TritonModelConfig",
    "ModelDeclaration",
    "declaration_of",
    "triton_model",
]
