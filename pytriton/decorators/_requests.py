"""What an inference callable receives and returns: the request and result types, a request's batch size."""

from __future__ import annotations

import numpy as np

from pytriton.exceptions import PyTritonRuntimeError, PyTritonValidationError

__all__ = [
    "InferenceRequest",
    "InferenceRequests",
    "InferenceResult",
    "InferenceResults",
    "InputNames",
    "PyTritonRuntimeError",
    "get_inference_request_batch_size",
]

InputNames = list[str]
InferenceRequest = dict[str, np.ndarray]
InferenceRequests = list[InferenceRequest] | tuple[InferenceRequest, ...]
InferenceResult = dict[str, np.ndarray]
InferenceResults = list[InferenceResult] | tuple[InferenceResult, ...]


def get_inference_request_batch_size(inference_request: InferenceRequest) -> int:
    """Get batch size from triton request: the size of the first axis of its first input.

    Args:
        inference_request (InferenceRequest): Triton request.

    Returns:
        int: Batch size.
    """
    try:
        first_input_value = next(iter(inference_request.values()))
    except StopIteration:
        raise PyTritonValidationError("Cannot get the batch size of a request without inputs") from None
    shape = first_input_value.shape if isinstance(first_input_value, np.ndarray) else np.shape(first_input_value)
    if not shape:
        raise PyTritonValidationError("Cannot get the batch size of a request whose inputs have no batch axis")
    return int(shape[0])
