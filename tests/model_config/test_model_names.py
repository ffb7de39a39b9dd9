"""Model names are checked as Triton checks a load's name (not empty, no '/' and not '..'), and may hold no control
character (a newline in a name splits log lines and metric labels); the same check for every way a model is named:
bind(), `pytriton serve --model-name`, @triton_model, a repository's configuration."""

from __future__ import annotations

import numpy as np
import pytest

from pytriton.exceptions import PyTritonError
from pytriton.model_config import Tensor, triton_model
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig

OUT = [TensorSpec("Y", "FP32", (1,))]


@pytest.mark.parametrize("name, problem", [
    ("bad\nname", "invalid model name 'bad\\nname', model name must not contain control characters"),
    ("tab\there", "must not contain control characters"),
    ("nul\0", "must not contain control characters"),
    ("a/b", "invalid model name 'a/b', model name must not contain path traversal characters"),
    ("..", "must not contain path traversal characters"),
    ("", "Model name cannot be empty"),
    ("   ", "Model name cannot be empty"),
])
def test_a_served_name_is_checked_as_triton_checks_it(name, problem):
    with pytest.raises(PyTritonError) as info:
        TritonModelConfig(model_name=name, inputs=[], outputs=OUT)
    assert problem in str(info.value)
    with pytest.raises(PyTritonError) as info:
        triton_model(name=name, outputs=[Tensor(name="Y", dtype=np.float32, shape=(1,))])
    assert problem in str(info.value)


@pytest.mark.parametrize("name", ["resnet50", "my-model.v2", "модель", "a b", "under_score"])
def test_ordinary_names_are_served(name):
    assert TritonModelConfig(model_name=name, inputs=[], outputs=OUT).model_name == name
