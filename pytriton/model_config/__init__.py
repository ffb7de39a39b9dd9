"""Model configuration: datatypes and the server-side model description."""

from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig

__all__ = ["TensorSpec", "TritonModelConfig"]
