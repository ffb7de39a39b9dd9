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


def test_every_row_of_a_batch_is_checked_not_only_the_first():
    """Rows whose outputs look alike are checked once per call; a row that differs is still checked in full."""
    good = {"A": np.zeros((1, 2), np.float32), "B": np.zeros((1, 2), np.int32)}
    batched = TritonModelConfig(model_name="two", inputs=CONFIG.inputs, outputs=CONFIG.outputs, max_batch_size=4)
    backend = CallableBackend(lambda r: r, batched)
    requests = [Request({}) for _ in range(3)]
    checked = backend.check_outputs(requests, [good, good, good])
    assert [[(name, datatype) for name, datatype, _ in outputs] for outputs, _, _ in checked] == [
        [("A", "FP32"), ("B", "INT32")]] * 3
    assert all(outputs[0][2] is good["A"] for outputs, _, _ in checked)
    wrong_shape = dict(good, A=np.zeros((1, 3), np.float32))
    with pytest.raises(InferenceCallableError, match=r"output 'A' of model 'two' has shape \[1, 3\]"):
        backend.check_outputs(requests, [good, good, wrong_shape])
    wrong_type = dict(good, B=np.zeros((1, 2), np.int32).tolist())
    with pytest.raises(InferenceCallableError, match="output 'B' of model 'two' must be a numpy array, got list"):
        backend.check_outputs(requests, [good, wrong_type, good])
    wrong_dtype = dict(good, B=np.zeros((1, 2), np.int64))
    with pytest.raises(InferenceCallableError, match="output 'B' of model 'two' has datatype INT64"):
        backend.check_outputs(requests, [good, good, wrong_dtype])
    # (not strict: a later row's FP64 output is cast, the rows before it are left as they are)
    loose = TritonModelConfig(model_name="two", inputs=CONFIG.inputs, outputs=CONFIG.outputs, max_batch_size=4,
                              strict=False)
    cast = CallableBackend(lambda r: r, loose).check_outputs(requests, [good, dict(good, A=np.zeros((1, 2), np.float64)), good])
    assert [outputs[0][2].dtype for outputs, _, _ in cast] == [np.float32] * 3
    assert cast[0][0][0][2] is good["A"] and cast[1][0][0][1] == "FP32"
