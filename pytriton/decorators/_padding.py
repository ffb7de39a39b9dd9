"""Filling and padding inputs: `@fill_optionals`, `@pad_batch`, and `ConstantPadder` for `@group_by_values`."""

from __future__ import annotations

import collections
from bisect import bisect_left
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import wrapt

from pytriton.decorators._context import get_model_config, split_context_kwargs
from pytriton.decorators._requests import InferenceResults, PyTritonRuntimeError, get_inference_request_batch_size
from pytriton.exceptions import PyTritonBadParameterError
from pytriton.model_config.triton_model_config import TritonModelConfig


def _as_array_or_none(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value)


class ConstantPadder:
    """Padder that pads the given batches with a constant value."""

    def __init__(self, pad_value: Any = 0) -> None:
        """Initialize the padder.

        Args:
            pad_value (int, optional): Padding value. Defaults to 0.
        """
        self.pad_value = pad_value

    def __call__(self, batches_list: InferenceResults) -> InferenceResults:
        """Pad the given batches with the specified value to pad size enabling further batching to single arrays.

        Args:
            batches_list (List[Dict[str, np.ndarray]]): List of batches to pad.

        Returns:
            List[Dict[str, np.ndarray]]: List of padded batches.

        Raises:
            PyTritonRuntimeError: If the input arrays for a given input name have different dtypes.
        """

        def _get_padded_shape(_batches: list[np.ndarray | None]) -> tuple[int, ...]:
            shapes = [batch.shape[1:] for batch in _batches if batch is not None]
            if len({len(shape) for shape in shapes}) > 1:
                raise PyTritonRuntimeError(
                    "All input arrays for given input name must have the same number of dimensions."
                )
            return tuple(int(max(dims)) for dims in zip(*shapes))

        def _get_padded_dtype(_batches: list[np.ndarray | None]) -> np.dtype:
            dtypes = [batch.dtype for batch in _batches if batch is not None]
            result_dtype = dtypes[0]
            if not all(dtype.kind == result_dtype.kind for dtype in dtypes):
                raise PyTritonRuntimeError("All input arrays for given input name must have the same dtype.")
            if result_dtype.kind in "SU":  # bytes or unicode strings: the longest one
                return max(dtypes, key=lambda dtype: dtype.itemsize)
            if not all(dtype == result_dtype for dtype in dtypes):
                raise PyTritonRuntimeError("All input arrays for given input name must have the same dtype.")
            return result_dtype

        input_names = list(
            collections.OrderedDict.fromkeys(input_name for batch in batches_list for input_name in batch)
        )
        batches_by_name = {
            input_name: [_as_array_or_none(batch.get(input_name)) for batch in batches_list]
            for input_name in input_names
        }
        for input_batches in batches_by_name.values():
            result_shape, result_dtype = _get_padded_shape(input_batches), _get_padded_dtype(input_batches)
            constant: Any
            if result_dtype.kind == "U":
                constant = ""
            elif result_dtype.kind in "SO":
                constant = b""
            else:
                constant = self.pad_value
            for batch_idx, batch in enumerate(input_batches):
                if batch is None:
                    continue
                pad_width = [(0, 0)] + [(0, b - a) for a, b in zip(batch.shape[1:], result_shape)]
                if any(after for _, after in pad_width):
                    if batch.dtype.kind == "O":
                        padded = np.full((batch.shape[0],) + result_shape, constant, dtype=object)
                        padded[tuple(slice(0, n) for n in batch.shape)] = batch
                        batch = padded
                    else:
                        batch = np.pad(batch, pad_width, mode="constant", constant_values=constant)
                input_batches[batch_idx] = batch.astype(result_dtype, copy=False)
        return [
            {name: batch for name, batches in batches_by_name.items() if (batch := batches[batch_idx]) is not None}
            for batch_idx in range(len(batches_list))
        ]


def _shape_matches(have: tuple[int, ...], expected: tuple[int, ...]) -> bool:
    return len(have) == len(expected) and all(e == -1 or h == e for h, e in zip(have, expected))


def _signature_mismatch(what: str, mismatches: dict[str, tuple[Any, Any]]) -> PyTritonBadParameterError:
    """The error for defaults whose `what` ("dtype" or "shape") differs from their input's."""
    listed = ", ".join(f"{name}: {what}={have} expected_{what}={expected}" for name, (have, expected) in mismatches.items())
    return PyTritonBadParameterError(
        f"Could not use {listed} defaults as they have different than input signature {what}s"
    )


def _verify_defaults(defaults: dict[str, Any], model_config: TritonModelConfig) -> None:
    """The defaults of `@fill_optionals` must name inputs and match their dtypes and shapes (without batch axis)."""
    inputs = {spec.name: spec for spec in model_config.inputs}
    not_matching_default_names = sorted(set(defaults) - set(inputs))
    if not_matching_default_names:
        raise PyTritonBadParameterError(f"Could not found {', '.join(not_matching_default_names)} inputs")

    non_numpy_items = {k: v for k, v in defaults.items() if not isinstance(v, np.ndarray)}
    if non_numpy_items:
        raise PyTritonBadParameterError(
            f"Could not use {', '.join([f'{k}={v}' for k, v in non_numpy_items.items()])} defaults "
            "as they are not NumPy arrays"
        )
    not_matching_dtypes = {
        k: (v.dtype, inputs[k].dtype) for k, v in defaults.items() if not _dtype_matches(v.dtype, inputs[k].dtype)
    }
    if not_matching_dtypes:
        raise _signature_mismatch("dtype", not_matching_dtypes)
    not_matching_shapes = {
        k: (v.shape, tuple(inputs[k].shape))
        for k, v in defaults.items()
        if not _shape_matches(v.shape, tuple(inputs[k].shape))
    }
    if not_matching_shapes:
        raise _signature_mismatch("shape", not_matching_shapes)


def _dtype_matches(have: np.dtype, expected: Any) -> bool:
    expected_dtype = np.dtype(expected)
    if expected_dtype.kind in "SO" or expected is bytes or expected is np.bytes_ or expected is object:
        return have.kind in "SO"  # BYTES: bytes arrays of any width, or object arrays
    return bool(have == expected_dtype)


def fill_optionals(**defaults: np.ndarray) -> Any:
    """This decorator ensures that any missing inputs in requests are filled with default values specified by the user.

    Default values should be NumPy arrays without batch axis.

    If you plan to group requests ex. with
    [@group_by_keys][pytriton.decorators.group_by_keys] or
    [@group_by_vales][pytriton.decorators.group_by_values] decorators
    provide default values for optional parameters at the beginning of decorators stack.
    The other decorators can then group requests into bigger batches resulting in a better model performance.

    Typical use:

        @fill_optionals()
        @group_by_keys()
        @batch
        def infer_fun(**inputs):
            ...
            return outputs

    Args:
        defaults: keyword arguments containing default values for missing inputs

    If you have default values for some optional parameter it is good idea to provide them at the very beginning,
    so the other decorators (e.g. @group_by_keys) can make bigger consistent groups.

    Raises (when the decorated callable is called):
        PyTritonBadParameterError: if a default names no model input, is not a NumPy array, or its dtype or shape
            (without the batch axis) differs from the input's.
    """

    @wrapt.decorator
    def _wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        model_config = get_model_config(wrapped, instance)
        _verify_defaults(defaults, model_config)

        requests = args[0]
        model_supports_batching = model_config.batching
        for request in requests:
            batch_size = None
            if model_supports_batching:
                batch_size = get_inference_request_batch_size(request) if len(request) else 1
            for default_key, default_value in defaults.items():
                if default_key in request:
                    continue
                if model_supports_batching:
                    # repeat once on each axis of the default, batch_size times on the new batch axis
                    default_value = np.tile(default_value, (cast(int, batch_size),) + (1,) * default_value.ndim)
                request[default_key] = default_value
        return wrapped(*args, **kwargs)

    return _wrapper


@wrapt.decorator
def pad_batch(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Add padding to the inputs batches.

    Decorator appends last rows to the inputs multiple times to get desired batch size (preferred batch size or
    max batch size from model config whatever is closer to current input size).

    The wrapped callable's result is returned as is (with the padded batch size); ``@batch`` placed above
    ``@pad_batch`` drops the rows of the padding from the outputs before splitting them per request.
    """
    inputs, _ = split_context_kwargs(kwargs)
    if not inputs:
        raise PyTritonRuntimeError(
            "The @pad_batch decorator expects batched inputs as keyword arguments; use it after @batch"
        )
    current_batch_size = get_inference_request_batch_size(inputs)
    config = get_model_config(wrapped, instance)
    batch_sizes = (
        []
        if (config.batcher is None or not config.batcher.preferred_batch_size)
        else sorted(config.batcher.preferred_batch_size)
    )
    batch_sizes.append(config.max_batch_size)
    position = bisect_left(batch_sizes, current_batch_size)
    if position >= len(batch_sizes):
        raise PyTritonRuntimeError(
            f"Cannot pad a batch of size {current_batch_size}: it exceeds max batch size {config.max_batch_size}"
        )
    batch_size = batch_sizes[position]
    if current_batch_size == 0 or batch_size == current_batch_size:
        return wrapped(*args, **kwargs)

    new_kwargs = dict(kwargs)
    for input_name, input_array in inputs.items():
        repeats = np.ones(input_array.shape[0], dtype=np.int64)
        repeats[-1] = batch_size - input_array.shape[0] + 1
        new_kwargs[input_name] = np.repeat(input_array, repeats, axis=0)
    return wrapped(*args, **new_kwargs)
