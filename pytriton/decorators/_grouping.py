"""`@group_by_keys` and `@group_by_values`: one call of the wrapped callable per group of requests or samples."""

from __future__ import annotations

import collections
import itertools
import operator
import struct
import typing
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import numpy as np
import wrapt

from pytriton.decorators._batch import batch, convert_output
from pytriton.decorators._context import split_context_kwargs
from pytriton.decorators._requests import (
    InferenceRequest,
    InferenceRequests,
    InferenceResult,
    PyTritonRuntimeError,
    get_inference_request_batch_size,
)
from pytriton.decorators._results import drive, generator_of_groups_error, is_generator
from pytriton.decorators._stack import has_wrapper_below
from pytriton.exceptions import PyTritonValidationError


@wrapt.decorator
def group_by_keys(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Group by keys.

    Decorator prepares groups of requests with the same set of keys and calls wrapped function
    for each group separately (it is convenient to use this decorator before batching, because the batching decorator
    requires consistent set of inputs as it stacks them into batches).

    Groups are called in the order of their sorted key sets; the results are returned in the order of the requests.
    """
    requests, *other_args = args

    def _steps() -> Generator[Any, Any, Any]:
        idx_inputs = [(idx, tuple(sorted(request.keys())), request) for idx, request in enumerate(requests)]
        idx_inputs.sort(key=operator.itemgetter(1))
        groups: list[tuple[tuple[int, ...], tuple[Any, ...]]] = []
        for _, group in itertools.groupby(idx_inputs, key=operator.itemgetter(1)):
            indices, _keys, group_requests = zip(*group)
            groups.append((indices, group_requests))
        idx_groups_res: list[tuple[int, Any]] = []
        for indices, group_requests in groups:
            result = yield wrapped(list(group_requests), *other_args, **kwargs)
            if is_generator(result):
                if len(groups) == 1:  # all requests in one group, in their order: pass the generator through
                    return result
                raise generator_of_groups_error("@group_by_keys")
            result = list(result)
            if len(result) != len(indices):
                raise PyTritonValidationError(
                    f"Inference callable returned {len(result)} results for {len(indices)} requests"
                )
            idx_groups_res.extend(zip(indices, result))
        idx_groups_res.sort(key=operator.itemgetter(0))
        return [result for _, result in idx_groups_res]

    return drive(_steps())


def _value_to_key(value: Any) -> Any:
    """A hashable, orderable grouping key of one sample of an input."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OSU":
            return _serialize_bytes_sample(value)
        return value.tobytes()
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bool, int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item() if value.dtype.kind not in "SU" else _value_to_key(value.item())
    return value


def _serialize_bytes_sample(array: np.ndarray) -> bytes:
    """Length-prefixed serialization of the elements of a bytes/str/object array (Triton's BYTES layout)."""
    chunks = []
    for item in array.flat:
        if isinstance(item, str):
            item = item.encode("utf-8")
        elif not isinstance(item, bytes):
            item = str(item).encode("utf-8")
        chunks.append(struct.pack("<I", len(item)))
        chunks.append(item)
    return b"".join(chunks)


def _merged_dtype(dtypes: list[np.dtype]) -> np.dtype:
    first = dtypes[0]
    if first.kind in "SU" and all(d.kind == first.kind for d in dtypes):
        return max(dtypes, key=lambda d: d.itemsize)
    return first


def group_by_values(*keys: str, pad_fn: typing.Callable[[InferenceRequests], InferenceRequests] | None = None) -> Any:
    """Decorator for grouping requests by values of selected keys.

    This function splits a batch into multiple sub-batches based on the specified keys values and
    calls the decorated function with each sub-batch. This is particularly useful when working with models
    that require dynamic parameters sent by the user.

    For example, given an input of the form:

        {"sentences": [b"Sentence1", b"Sentence2", b"Sentence3"], "param1": [1, 1, 2], "param2": [1, 1, 1]}

    Using @group_by_values("param1", "param2") will split the batch into two sub-batches:

        [
            {"sentences": [b"Sentence1", b"Sentence2"], "param1": [1, 1], "param2": [1, 1]},
            {"sentences": [b"Sentence3"], "param1": [2], "param2": [1]}
        ]

    This decorator should be used after the @batch decorator.

    Example usage:

        @batch
        @group_by_values("param1", "param2")
        def infer_fun(**inputs):
            ...
            return outputs

    The sub-batch results are merged back into one batch in the order of the samples. Their outputs must have the
    same shapes (apart from the batch axis); otherwise pass ``pad_fn`` (e.g. ``ConstantPadder()``), which receives
    the list of sub-batch results and returns them padded.

    Args:
        *keys: List of keys to group by.
        pad_fn: Optional function to pad the batch to the same size before merging again to a single batch.

    Returns:
        The decorator function.
    """

    def _group_request(_request: InferenceRequest, _batch_size: int) -> Iterator[tuple[list[int], InferenceRequest]]:
        present_keys = [key for key in keys if key in _request]
        idx_inputs = [
            (sample_idx, tuple(_value_to_key(_request[key][sample_idx]) for key in present_keys))
            for sample_idx in range(_batch_size)
        ]
        idx_inputs.sort(key=operator.itemgetter(1))
        for _, group in itertools.groupby(idx_inputs, key=operator.itemgetter(1)):
            samples_idxes = [sample_idx for sample_idx, _ in group]
            grouped_request = {input_name: value[samples_idxes, ...] for input_name, value in _request.items()}
            yield samples_idxes, grouped_request

    @wrapt.decorator
    def _wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if has_wrapper_below(wrapped, batch):
            raise PyTritonRuntimeError("The @group_by_values decorator must be used after the @batch decorator.")

        request, other_kwargs = split_context_kwargs(kwargs)
        if not request:
            raise PyTritonRuntimeError(
                "The @group_by_values decorator must be used after the @batch decorator "
                "(it expects batched inputs as keyword arguments)."
            )
        batch_size = get_inference_request_batch_size(request)

        def _steps() -> Generator[Any, Any, Any]:
            groups = list(_group_request(request, batch_size))
            sample_indices_with_interim_result: list[tuple[list[int], dict[str, Any]]] = []
            for sample_indices, grouped_sub_request in groups:
                interim_result = yield wrapped(*args, **grouped_sub_request, **other_kwargs)
                if is_generator(interim_result):
                    if len(groups) == 1:  # the whole batch in one group: pass the generator through
                        return interim_result
                    raise generator_of_groups_error("@group_by_values")
                interim_result = convert_output(interim_result, wrapped, instance)
                sample_indices_with_interim_result.append((sample_indices, interim_result))
            return _merge(sample_indices_with_interim_result, batch_size)

        return drive(_steps())

    def _merge(sample_indices_with_interim_result: Sequence[tuple[Any, Any]], batch_size: int) -> InferenceResult:
        if not sample_indices_with_interim_result:
            return {}
        if pad_fn is not None:
            indices, results = tuple(map(tuple, zip(*sample_indices_with_interim_result)))
            sample_indices_with_interim_result = tuple(zip(indices, pad_fn(results)))

        output_names = list(
            collections.OrderedDict.fromkeys(
                name for _, result in sample_indices_with_interim_result for name in result
            )
        )
        merged = {}
        for output_name in output_names:
            parts = []
            for indices, result in sample_indices_with_interim_result:
                if output_name not in result:
                    raise PyTritonRuntimeError(
                        f"Output {output_name!r} is missing in the results of some of the sub-batches "
                        "made by @group_by_values"
                    )
                data = np.asarray(result[output_name])
                if data.ndim == 0 or data.shape[0] != len(indices):
                    raise PyTritonRuntimeError(
                        f"Output {output_name!r} of a sub-batch made by @group_by_values has shape {data.shape}; "
                        f"expected batch size {len(indices)}"
                    )
                parts.append((indices, data))
            sample_shapes = {data.shape[1:] for _, data in parts}
            if len(sample_shapes) > 1:
                raise PyTritonRuntimeError(
                    f"Cannot merge output {output_name!r} of the sub-batches made by @group_by_values: they have "
                    f"different shapes {sorted(sample_shapes)}. Pass pad_fn (e.g. ConstantPadder()) to pad them."
                )
            (sample_shape,) = sample_shapes
            dtype = _merged_dtype([data.dtype for _, data in parts])
            merged_array = np.empty((batch_size,) + sample_shape, dtype=dtype)
            for indices, data in parts:
                merged_array[indices, ...] = data
            merged[output_name] = merged_array
        return merged

    return _wrapper
