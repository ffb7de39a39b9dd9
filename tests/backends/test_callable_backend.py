"""CallableBackend.check_outputs: what a callable must return for the requests it was given."""

from __future__ import annotations

import numpy as np
import pytest

from pytriton.backends.callable_backend import CallableBackend, InferenceCallableError
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.types import Request

CONFIG = TritonModelConfig(
    model_name="two",
    inputs=[TensorSpec("X", "FP32", (2,))],
    outputs=[TensorSpec("A", "FP32", (2,)), TensorSpec("B", "INT32", (2,))],
)
A = np.zeros(2, dtype=np.float32)
B = np.zeros(2, dtype=np.int32)


def check(responses, *requested):
    requests = [Request({}, None, None, list(names) or None) for names in requested]
    return CallableBackend(lambda r: r, CONFIG).check_outputs(requests, responses)


def test_all_declared_outputs_when_none_listed():
    [(outputs, error, _)] = check([{"B": B, "A": A}], [])
    assert error == "" and [name for name, _, _ in outputs] == ["A", "B"]  # in declared order
    with pytest.raises(InferenceCallableError) as info:
        check([{"A": A}], [])
    assert str(info.value) == (
        "inference callable of model 'two' did not return output 'B' (the request lists no outputs, so every output "
        "the model declares is expected)"
    )


def test_only_requested_outputs():
    [(outputs, _, _)] = check([{"A": A, "B": B}], ["B"])
    assert [name for name, _, _ in outputs] == ["B"]
    [(outputs, _, _)] = check([{"A": A}], ["A"])  # what was not asked for may be left out
    assert [name for name, _, _ in outputs] == ["A"]
    with pytest.raises(InferenceCallableError, match="did not return requested output 'B'$"):
        check([{"A": A}, {"A": A}], ["A"], ["A", "B"])  # the second request of the batch misses one


def test_undeclared_output_is_an_error():
    with pytest.raises(InferenceCallableError, match="returned output 'C', which the model does not declare"):
        check([{"A": A, "B": B, "C": A}], [])
