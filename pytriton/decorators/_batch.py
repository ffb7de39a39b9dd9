"""`@batch` and `@sample`: requests in as keyword arguments, outputs back per request."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import wrapt

from pytriton.decorators._context import get_model_config
from pytriton.decorators._padding import pad_batch
from pytriton.decorators._requests import get_inference_request_batch_size
from pytriton.decorators._results import async_value, map_result
from pytriton.decorators._stack import has_wrapper_below
from pytriton.exceptions import PyTritonValidationError
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.types import Request


class _OutputBatchSizeError(PyTritonValidationError, ValueError):
    """Output batch size differs from the requests' total (PyTriton raises ValueError here)."""


_PADS_BATCH: dict[int, tuple[Any, bool]] = {}
_DICT_KEYS: type = type({}.keys())


def _batch_size(row: Any) -> int:
    """`get_inference_request_batch_size` of a request (0 without inputs), the size of its first array's first axis
    read directly when it is a numpy array."""
    if not len(row):
        return 0
    first = next(iter(row.values()))
    if type(first) is np.ndarray and first.ndim:
        return int(first.shape[0])
    return get_inference_request_batch_size(row)


def _pads_batch(wrapped: Any) -> bool:
    """`has_wrapper_below(wrapped, pad_batch)`, remembered per callable (a wrapt stack does not change)."""
    key = getattr(wrapped, "__func__", wrapped)  # a bound method is a new object on every access
    entry = _PADS_BATCH.get(id(key))
    if entry is None or entry[0] is not key:
        if len(_PADS_BATCH) > 1024:  # callables made on the fly: do not keep them all alive
            _PADS_BATCH.clear()
        entry = _PADS_BATCH[id(key)] = (key, has_wrapper_below(wrapped, pad_batch))
    return entry[1]


def convert_output(
    outputs: dict[str, Any] | list[Any] | tuple[Any, ...],
    wrapped: Any = None,
    instance: Any = None,
    model_config: TritonModelConfig | None = None,
) -> dict[str, Any]:
    """Converts output from tuple ot list to dictionary.

    It is utility function useful for mapping output list into dictionary of outputs.
    Currently, it is used in @sample and @batch decorators (we assume that user can return list or tuple of outputs
    instead of dictionary if this list matches output list in model config (size and order).
    """
    if isinstance(outputs, dict):
        return outputs
    if isinstance(outputs, Mapping):
        return dict(outputs)
    if isinstance(outputs, (list, tuple)):
        if model_config is None:
            model_config = get_model_config(wrapped, instance)
        if len(outputs) != len(model_config.outputs):
            raise PyTritonValidationError("Outputs length different than config outputs length")
        return {config_output.name: output for config_output, output in zip(model_config.outputs, outputs)}
    raise PyTritonValidationError(f"Unsupported output type {type(outputs)}.")


@wrapt.decorator
def sample(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Decorator is used for non-batched inputs to convert from one element list of requests to request kwargs.

    Decorator takes first request and convert it into named inputs.
    Useful with non-batching models - instead of one element list of request, we will get named inputs - `kwargs`.
    """
    requests = args[0]
    kwargs = dict(kwargs)
    kwargs.update(requests[0])
    outputs = wrapped(*args[1:], **kwargs)
    return map_result(outputs, lambda _outputs: [convert_output(_outputs, wrapped, instance)])


@wrapt.decorator
def batch(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Decorator for converting list of request dicts to dict of input batches.

    Converts list of request dicts to dict of input batches.
    It passes **kwargs to inference callable where each named input contains numpy array with batch of requests
    received by Triton server.
    We assume that each request has the same set of keys (you can use group_by_keys decorator before
    using @batch decorator if your requests may have different set of keys).
    Several requests are concatenated (a new array per input); a single request's arrays are passed as they are,
    without a copy (read-only views, like every input this server hands a callable).

    The outputs (a dict, or a list/tuple in the order of the model config outputs) must have the total batch size
    of the requests on their first axis; they are split back into one result dict per request. Generator
    callables (decoupled models) yield such outputs; each yield becomes a list of per-request results.

    Raises:
        PyTritonValidationError: If the requests have different set of keys.
        ValueError: If the output tensors have different than expected batch sizes. Expected batch size is
            calculated as a sum of batch sizes of all requests. (The error raised is both a ValueError and a
            PyTritonValidationError.)
    """
    req_list = args[0]
    if len(req_list) == 0:
        return async_value([]) if inspect.iscoroutinefunction(wrapped) else []
    # (a server's Request: its dict of arrays, read without the mapping's Python-level methods)
    rows = [req.data if type(req) is Request else req for req in req_list]
    first_keys = rows[0].keys()
    input_names = list(first_keys)
    if type(first_keys) is _DICT_KEYS:  # (dict key views compare as sets)
        for row in rows[1:]:
            if row.keys() != first_keys:
                raise PyTritonValidationError("Cannot batch requests with different set of inputs keys")
    else:
        for req_dict2 in rows[1:]:
            if set(input_names) != set(req_dict2.keys()):
                raise PyTritonValidationError("Cannot batch requests with different set of inputs keys")

    if len(rows) == 1:
        # One request is its own batch: hand over its (read-only, shared-memory) arrays without a copy.
        inputs = {name: rows[0][name] for name in input_names}
    else:
        inputs = {name: np.concatenate([row[name] for row in rows]) for name in input_names}

    request_batch_sizes = [_batch_size(row) for row in rows]
    total_batch_size = sum(request_batch_sizes)
    trim_padding = _pads_batch(wrapped)

    new_kwargs = dict(kwargs)
    new_kwargs.update(inputs)
    outputs = wrapped(*args[1:], **new_kwargs)

    def _split_result(_result: Any) -> list[dict[str, Any]]:
        _outputs = convert_output(_result, wrapped, instance)
        for output_name, output_tensor in _outputs.items():
            if not isinstance(output_tensor, np.ndarray):
                raise PyTritonValidationError(
                    f"Output {output_name!r} must be a numpy array, got {type(output_tensor).__name__}"
                )
            if output_tensor.ndim == 0:
                raise _OutputBatchSizeError(
                    f"Output {output_name!r} has no batch axis (shape ()). Expected batch size: {total_batch_size}."
                )
        not_matching = {name: t.shape for name, t in _outputs.items() if t.shape[0] != total_batch_size}
        if not_matching and trim_padding and all(t.shape[0] >= total_batch_size for t in _outputs.values()):
            # @pad_batch below appended rows after the real samples: drop them
            _outputs = {name: t[:total_batch_size] for name, t in _outputs.items()}
            not_matching = {}
        if not_matching:
            shapes = ", ".join(f"{name}: {shape}" for name, shape in not_matching.items())
            raise _OutputBatchSizeError(
                f"Received output tensors with different batch sizes: {shapes}. "
                f"Expected batch size: {total_batch_size}. "
            )
        if len(request_batch_sizes) == 1:
            return [dict(_outputs)]
        items = list(_outputs.items())  # (numpy arrays, at least 1-d: a slice of the first axis is a view)
        if len(items) == 1 and total_batch_size == len(request_batch_sizes) and 0 not in request_batch_sizes:
            name, tensor = items[0]  # (the usual: one output, a row per request)
            return [{name: tensor[index:index + 1]} for index in range(total_batch_size)]
        out_list = []
        start_idx = 0
        for request_batch_size in request_batch_sizes:
            end_idx = start_idx + request_batch_size
            out_list.append({name: tensor[start_idx:end_idx] for name, tensor in items})
            start_idx = end_idx
        return out_list

    return map_result(outputs, _split_result)
