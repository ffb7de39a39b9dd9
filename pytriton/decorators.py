"""Inference callable decorators, compatible with ``pytriton.decorators`` of NVIDIA PyTriton 0.7.

An inference callable receives a list of requests (mappings of input name to ``np.ndarray``) and returns one
result dict per request. The decorators here adapt that interface to friendlier ones:

* ``@batch`` concatenates the requests into one batch per input, passed as ``**kwargs``, and splits the outputs
  back per request. ``@sample`` does the same for the single request of a non-batching model.
* ``@group_by_keys`` / ``@group_by_values(...)`` call the wrapped callable once per group of requests (samples).
* ``@fill_optionals(...)`` fills missing optional inputs, ``@first_value(...)`` turns batched parameters into
  scalars, ``@pad_batch`` pads a batch to the preferred or maximal batch size.
* ``@triton_context`` passes the ``TritonContext`` as the ``triton_context`` keyword argument.

All decorators are built on ``wrapt``, so they keep the signature of the wrapped callable, work on plain
functions, methods and callable objects, and can be stacked. The hosting code makes the model configuration
available by setting ``__triton_context__`` on the bound callable (on ``__self__`` for bound methods) and putting
the ``TritonModelConfig`` into ``context.model_configs[callable]``.

Beyond PyTriton 0.7 (which handles only sync callables and, in ``@batch``, sync generators), the decorators
also accept ``async def`` callables and async generators: when the wrapped callable returns an awaitable, the
decorated callable returns a coroutine (and ``inspect.iscoroutinefunction`` reports the decorated ``async def``
as a coroutine function, since ``wrapt`` proxies it); when it returns an async generator, so does the decorated one.
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
import itertools
import operator
import struct
import typing
from bisect import bisect_left
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, NamedTuple

import numpy as np
import wrapt

from pytriton.exceptions import PyTritonBadParameterError, PyTritonError, PyTritonValidationError
from pytriton.model_config.triton_model_config import TritonModelConfig

try:  # pragma: no cover - depends on the version of pytriton.exceptions
    from pytriton.exceptions import PyTritonRuntimeError  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover

    class PyTritonRuntimeError(PyTritonError):  # type: ignore[no-redef]
        """Error raised while running an inference callable (PyTriton's ``PyTritonRuntimeError``)."""


__all__ = [
    "TRITON_CONTEXT_FIELD_NAME",
    "ConstantPadder",
    "InferenceRequest",
    "InferenceRequests",
    "InferenceResult",
    "InferenceResults",
    "InputNames",
    "ModelConfigDict",
    "PyTritonRuntimeError",
    "TritonContext",
    "batch",
    "convert_output",
    "fill_optionals",
    "first_value",
    "get_inference_request_batch_size",
    "get_model_config",
    "get_triton_context",
    "group_by_keys",
    "group_by_values",
    "pad_batch",
    "sample",
    "triton_context",
]

#: Name of the keyword argument ``@triton_context`` passes (``pytriton.constants.TRITON_CONTEXT_FIELD_NAME``).
TRITON_CONTEXT_FIELD_NAME = "triton_context"

InputNames = list[str]
InferenceRequest = dict[str, np.ndarray]
InferenceRequests = list[InferenceRequest] | tuple[InferenceRequest, ...]
InferenceResult = dict[str, np.ndarray]
InferenceResults = list[InferenceResult] | tuple[InferenceResult, ...]

# keyword arguments that are never model inputs (PyTriton's list; used in error messages as PyTriton does)
_SPECIAL_KEYS = ["__triton_context__"]


class _WrappedWithWrapper(NamedTuple):
    wrapped: Callable | None
    wrapper: Callable | None


class _OutputBatchSizeError(PyTritonValidationError, ValueError):
    """Output batch size differs from the requests' total (PyTriton raises ValueError here)."""


class _ModelConfigNotFoundError(PyTritonValidationError, KeyError):
    """No model config for a callable (PyTriton lets the KeyError of the config dict through)."""

    def __str__(self) -> str:
        return self.message


# --------------------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------------------


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


def _is_context_kwarg(name: str, value: Any) -> bool:
    """Whether a keyword argument is the triton context rather than a model input."""
    return name in _SPECIAL_KEYS or (name == TRITON_CONTEXT_FIELD_NAME and isinstance(value, TritonContext))


def _split_context_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    inputs = {k: v for k, v in kwargs.items() if not _is_context_kwarg(k, v)}
    others = {k: v for k, v in kwargs.items() if _is_context_kwarg(k, v)}
    return inputs, others


def _get_wrapt_stack(wrapped) -> list[_WrappedWithWrapper]:
    """Returns stack of wrapped functions with wrappers applied to inference callable."""
    stack = []
    infer_callable = wrapped
    seen = set()
    while infer_callable is not None and id(infer_callable) not in seen:
        seen.add(id(infer_callable))
        stack.append(_WrappedWithWrapper(infer_callable, getattr(infer_callable, "_self_wrapper", None)))
        infer_callable = getattr(infer_callable, "__wrapped__", None)
    return stack


_PADS_BATCH: dict[int, tuple[Any, bool]] = {}


def _pads_batch(wrapped) -> bool:
    """`_has_wrapper_below(wrapped, pad_batch)`, remembered per callable (a wrapt stack does not change)."""
    key = getattr(wrapped, "__func__", wrapped)  # a bound method is a new object on every access
    entry = _PADS_BATCH.get(id(key))
    if entry is None or entry[0] is not key:
        if len(_PADS_BATCH) > 1024:  # callables made on the fly: do not keep them all alive
            _PADS_BATCH.clear()
        entry = _PADS_BATCH[id(key)] = (key, _has_wrapper_below(wrapped, pad_batch))
    return entry[1]


def _has_wrapper_below(wrapped, decorator) -> bool:
    """Whether ``decorator`` (a wrapt decorator of this module) was applied anywhere in ``wrapped``'s stack."""
    targets = (decorator, getattr(decorator, "__wrapped__", None))
    return any(
        item.wrapper is not None and any(item.wrapper is target for target in targets if target is not None)
        for item in _get_wrapt_stack(wrapped)
    )


def _map_result(result: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to a result, each item of a (async) generator, or the value of an awaitable."""
    if type(result) in (dict, list, tuple):  # the common case, without the (slow) awaitable checks
        return fn(result)
    if inspect.isgenerator(result):
        return _map_generator(result, fn)
    if inspect.isasyncgen(result):
        return _map_async_generator(result, fn)
    if inspect.isawaitable(result):
        return _map_awaitable(result, fn)
    return fn(result)


def _map_generator(gen, fn):
    try:
        for item in gen:
            yield fn(item)
    finally:
        gen.close()


async def _map_async_generator(agen, fn):
    try:
        async for item in agen:
            yield fn(item)
    finally:
        await agen.aclose()


async def _map_awaitable(awaitable, fn):
    result = await awaitable
    if inspect.isasyncgen(result) or inspect.isgenerator(result):  # pragma: no cover - unusual callables
        raise PyTritonRuntimeError("An awaitable inference callable must not resolve to a generator")
    return fn(result)


def _drive(steps: typing.Generator):
    """Run ``steps``, a generator yielding raw results of calls to a wrapped callable and receiving their values.

    Runs synchronously while the results are plain values; as soon as one is awaitable, the rest runs in a
    coroutine, which is returned (so a decorator around an ``async def`` callable returns a coroutine).
    """
    try:
        value = next(steps)
        while not inspect.isawaitable(value):
            value = steps.send(value)
    except StopIteration as stop:
        return stop.value
    return _drive_async(steps, value)


async def _drive_async(steps: typing.Generator, awaitable):
    value = await awaitable
    while True:
        try:
            value = steps.send(value)
        except StopIteration as stop:
            return stop.value
        if inspect.isawaitable(value):
            value = await value


async def _async_value(value: Any) -> Any:
    return value


def _is_generator(result: Any) -> bool:
    return inspect.isgenerator(result) or inspect.isasyncgen(result)


def _generator_of_groups_error(decorator_name: str) -> PyTritonRuntimeError:
    return PyTritonRuntimeError(
        f"The {decorator_name} decorator supports inference callables returning generators only when "
        "there is a single group to process"
    )


# --------------------------------------------------------------------------------------------------------------
# context and model config
# --------------------------------------------------------------------------------------------------------------


def _callable_key(infer_callable: Any, _depth: int = 0) -> Any:
    """Identity of an inference callable, seen through wrappers (wrapt proxies, functools.wraps) and binding.

    Bound methods of the same object and function are equal (a new bound method object is made on every
    attribute access); a bound ``__call__`` is identified with its object, as PyTriton does.
    """
    current = infer_callable
    seen = set()
    while _depth < 64:
        if inspect.ismethod(current):
            owner = current.__self__
            func = current.__func__
            if getattr(func, "__name__", None) == "__call__":
                return ("object", id(owner))
            return ("method", id(owner), _callable_key(func, _depth + 1))
        if id(current) in seen:
            break
        seen.add(id(current))
        inner = getattr(current, "__wrapped__", None)
        if inner is None or inner is current:
            break
        current = inner
        _depth += 1
    return ("object", id(current))


class ModelConfigDict(MutableMapping):
    """Dictionary for storing model configs for inference callable.

    Keys are inference callables; a callable and any ``wrapt`` wrapper of it map to the same entry, as do the
    bound methods ``obj.infer`` obtained by separate attribute accesses. The registered callables are kept
    referenced (and returned by iteration), so identity-based keys stay valid.
    """

    def __init__(self):
        """Create ModelConfigDict object."""
        self._data: dict[Any, TritonModelConfig] = {}
        self._callables: dict[Any, Callable] = {}

    @staticmethod
    def _get_model_config_key(infer_callable: Callable) -> Any:
        """Prepares TritonModelConfig dictionary key for function/callable."""
        return _callable_key(infer_callable)

    def __getitem__(self, infer_callable: Callable) -> TritonModelConfig:
        """Get model config for inference callable."""
        return self._data[self._get_model_config_key(infer_callable)]

    def __setitem__(self, infer_callable: Callable, item: TritonModelConfig):
        """Set model config for inference callable."""
        key = self._get_model_config_key(infer_callable)
        self._callables.setdefault(key, infer_callable)
        self._data[key] = item

    def __delitem__(self, infer_callable: Callable):
        """Delete model config for inference callable."""
        key = self._get_model_config_key(infer_callable)
        del self._data[key]
        del self._callables[key]

    def __len__(self):
        """Get number of inference callable keys."""
        return len(self._data)

    def __iter__(self):
        """Iterate over inference callable keys."""
        return iter(list(self._callables.values()))

    def __repr__(self) -> str:
        entries = ", ".join(f"{c!r}: {cfg.model_name!r}" for c, cfg in zip(self, self._data.values()))
        return f"ModelConfigDict({{{entries}}})"


@dataclasses.dataclass
class TritonContext:
    """Triton context definition class."""

    model_configs: ModelConfigDict = dataclasses.field(default_factory=ModelConfigDict)


def get_triton_context(wrapped, instance) -> TritonContext:
    """Retrieves triton context from callable.

    It is used in @triton_context to get triton context registered by triton binding in inference callable.
    If you use @triton_context decorator you do not need this function.
    """
    for caller in (instance, wrapped):
        if caller is None:
            continue
        context = getattr(caller, "__triton_context__", None)
        if context is not None:
            return context
    raise PyTritonValidationError("Wrapped function or object must bound with triton to get  __triton_context__")


def get_model_config(wrapped, instance) -> TritonModelConfig:
    """Retrieves instance of TritonModelConfig from callable.

    It is internally used in convert_output function to get output list from model.
    You can use this in custom decorators if you need access to model_config information.
    If you use @triton_context decorator you do not need this function (you can get model_config directly
    from triton_context passing function/callable to dictionary getter).
    """
    context = get_triton_context(wrapped, instance)
    try:
        return context.model_configs[wrapped]
    except KeyError:
        raise _ModelConfigNotFoundError(
            f"No model config registered in the triton context for inference callable {wrapped!r}"
        ) from None


def convert_output(
    outputs: dict | list | tuple, wrapped=None, instance=None, model_config: TritonModelConfig | None = None
):
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


# --------------------------------------------------------------------------------------------------------------
# @sample, @batch
# --------------------------------------------------------------------------------------------------------------


@wrapt.decorator
def sample(wrapped, instance, args, kwargs):
    """Decorator is used for non-batched inputs to convert from one element list of requests to request kwargs.

    Decorator takes first request and convert it into named inputs.
    Useful with non-batching models - instead of one element list of request, we will get named inputs - `kwargs`.
    """
    requests = args[0]
    kwargs = dict(kwargs)
    kwargs.update(requests[0])
    outputs = wrapped(*args[1:], **kwargs)
    return _map_result(outputs, lambda _outputs: [convert_output(_outputs, wrapped, instance)])


@wrapt.decorator
def batch(wrapped, instance, args, kwargs):
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
        return _async_value([]) if inspect.iscoroutinefunction(wrapped) else []
    input_names = list(req_list[0].keys())
    for req_dict2 in req_list[1:]:
        if set(input_names) != set(req_dict2.keys()):
            raise PyTritonValidationError("Cannot batch requests with different set of inputs keys")

    if len(req_list) == 1:
        # One request is its own batch: hand over its (read-only, shared-memory) arrays without a copy.
        inputs = {name: req_list[0][name] for name in input_names}
    else:
        inputs = {name: np.concatenate([req[name] for req in req_list]) for name in input_names}

    request_batch_sizes = [get_inference_request_batch_size(req) if len(req) else 0 for req in req_list]
    total_batch_size = sum(request_batch_sizes)
    trim_padding = _pads_batch(wrapped)

    new_kwargs = dict(kwargs)
    new_kwargs.update(inputs)
    outputs = wrapped(*args[1:], **new_kwargs)

    def _split_result(_result):
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
        out_list = []
        start_idx = 0
        for request_batch_size in request_batch_sizes:
            end_idx = start_idx + request_batch_size
            out_list.append({name: tensor[start_idx:end_idx, ...] for name, tensor in _outputs.items()})
            start_idx = end_idx
        return out_list

    return _map_result(outputs, _split_result)


# --------------------------------------------------------------------------------------------------------------
# @group_by_keys, @group_by_values, ConstantPadder
# --------------------------------------------------------------------------------------------------------------


@wrapt.decorator
def group_by_keys(wrapped, instance, args, kwargs):
    """Group by keys.

    Decorator prepares groups of requests with the same set of keys and calls wrapped function
    for each group separately (it is convenient to use this decorator before batching, because the batching decorator
    requires consistent set of inputs as it stacks them into batches).

    Groups are called in the order of their sorted key sets; the results are returned in the order of the requests.
    """
    requests, *other_args = args

    def _steps():
        idx_inputs = [(idx, tuple(sorted(request.keys())), request) for idx, request in enumerate(requests)]
        idx_inputs.sort(key=operator.itemgetter(1))
        groups = []
        for _, group in itertools.groupby(idx_inputs, key=operator.itemgetter(1)):
            indices, _keys, group_requests = zip(*group)
            groups.append((indices, group_requests))
        idx_groups_res = []
        for indices, group_requests in groups:
            result = yield wrapped(list(group_requests), *other_args, **kwargs)
            if _is_generator(result):
                if len(groups) == 1:  # all requests in one group, in their order: pass the generator through
                    return result
                raise _generator_of_groups_error("@group_by_keys")
            result = list(result)
            if len(result) != len(indices):
                raise PyTritonValidationError(
                    f"Inference callable returned {len(result)} results for {len(indices)} requests"
                )
            idx_groups_res.extend(zip(indices, result))
        idx_groups_res.sort(key=operator.itemgetter(0))
        return [result for _, result in idx_groups_res]

    return _drive(_steps())


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


def group_by_values(*keys, pad_fn: typing.Callable[[InferenceRequests], InferenceRequests] | None = None):
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

    def _group_request(_request: InferenceRequest, _batch_size: int):
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
    def _wrapper(wrapped, instance, args, kwargs):
        if _has_wrapper_below(wrapped, batch):
            raise PyTritonRuntimeError("The @group_by_values decorator must be used after the @batch decorator.")

        request, other_kwargs = _split_context_kwargs(kwargs)
        if not request:
            raise PyTritonRuntimeError(
                "The @group_by_values decorator must be used after the @batch decorator "
                "(it expects batched inputs as keyword arguments)."
            )
        batch_size = get_inference_request_batch_size(request)

        def _steps():
            groups = list(_group_request(request, batch_size))
            sample_indices_with_interim_result = []
            for sample_indices, grouped_sub_request in groups:
                interim_result = yield wrapped(*args, **grouped_sub_request, **other_kwargs)
                if _is_generator(interim_result):
                    if len(groups) == 1:  # the whole batch in one group: pass the generator through
                        return interim_result
                    raise _generator_of_groups_error("@group_by_values")
                interim_result = convert_output(interim_result, wrapped, instance)
                sample_indices_with_interim_result.append((sample_indices, interim_result))
            return _merge(sample_indices_with_interim_result, batch_size)

        return _drive(_steps())

    def _merge(sample_indices_with_interim_result, batch_size: int) -> InferenceResult:
        if not sample_indices_with_interim_result:
            return {}
        if pad_fn is not None:
            indices, results = tuple(map(tuple, zip(*sample_indices_with_interim_result)))
            results = pad_fn(results)
            sample_indices_with_interim_result = tuple(zip(indices, results))

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


def _as_array_or_none(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value)


class ConstantPadder:
    """Padder that pads the given batches with a constant value."""

    def __init__(self, pad_value=0):
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

        def _get_padded_shape(_batches: list[np.ndarray]) -> tuple[int, ...]:
            shapes = [batch.shape[1:] for batch in _batches if batch is not None]
            if len({len(shape) for shape in shapes}) > 1:
                raise PyTritonRuntimeError(
                    "All input arrays for given input name must have the same number of dimensions."
                )
            return tuple(int(max(dims)) for dims in zip(*shapes))

        def _get_padded_dtype(_batches: list[np.ndarray]) -> np.dtype:
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
            {name: batches[batch_idx] for name, batches in batches_by_name.items() if batches[batch_idx] is not None}
            for batch_idx in range(len(batches_list))
        ]


# --------------------------------------------------------------------------------------------------------------
# @fill_optionals, @pad_batch, @first_value, @triton_context
# --------------------------------------------------------------------------------------------------------------


def _dtype_matches(have: np.dtype, expected: Any) -> bool:
    expected_dtype = np.dtype(expected)
    if expected_dtype.kind in "SO" or expected is bytes or expected is np.bytes_ or expected is object:
        return have.kind in "SO"  # BYTES: bytes arrays of any width, or object arrays
    return have == expected_dtype


def fill_optionals(**defaults):
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

    def _verify_defaults(model_config: TritonModelConfig):
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
            non_matching_dtypes_str_list = [
                f"{name}: dtype={have_dtype} expected_dtype={expected_dtype}"
                for name, (have_dtype, expected_dtype) in not_matching_dtypes.items()
            ]
            raise PyTritonBadParameterError(
                f"Could not use {', '.join(non_matching_dtypes_str_list)} "
                f"defaults as they have different than input signature dtypes"
            )

        def _shape_match(_have_shape, _expected_shape):
            return len(_have_shape) == len(_expected_shape) and all(
                e == -1 or h == e for h, e in zip(_have_shape, _expected_shape)
            )

        not_matching_shapes = {
            k: (v.shape, tuple(inputs[k].shape))
            for k, v in defaults.items()
            if not _shape_match(v.shape, tuple(inputs[k].shape))
        }
        if not_matching_shapes:
            non_matching_shapes_str_list = [
                f"{name}: shape={have_shape} expected_shape={expected_shape}"
                for name, (have_shape, expected_shape) in not_matching_shapes.items()
            ]
            raise PyTritonBadParameterError(
                f"Could not use {', '.join(non_matching_shapes_str_list)} "
                f"defaults as they have different than input signature shapes"
            )

    @wrapt.decorator
    def _wrapper(wrapped, instance, args, kwargs):
        model_config = get_model_config(wrapped, instance)
        _verify_defaults(model_config)

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
                    default_value = np.tile(default_value, (batch_size,) + (1,) * default_value.ndim)
                request[default_key] = default_value
        return wrapped(*args, **kwargs)

    return _wrapper


@wrapt.decorator
def pad_batch(wrapped, instance, args, kwargs):
    """Add padding to the inputs batches.

    Decorator appends last rows to the inputs multiple times to get desired batch size (preferred batch size or
    max batch size from model config whatever is closer to current input size).

    The wrapped callable's result is returned as is (with the padded batch size); ``@batch`` placed above
    ``@pad_batch`` drops the rows of the padding from the outputs before splitting them per request.
    """
    inputs, _ = _split_context_kwargs(kwargs)
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


def _all_values_equal(values: np.ndarray) -> bool:
    if values.shape[0] <= 1:
        return True
    first = values[:1]
    try:
        equal = values == first
        if values.dtype.kind in "fc":
            equal = equal | (np.isnan(values) & np.isnan(first))
        return bool(np.all(equal))
    except Exception:  # noqa: BLE001  # pragma: no cover - incomparable objects
        return all(np.array_equal(value, values[0]) for value in values[1:])


def first_value(*keys: str, squeeze_single_values=True, strict: bool = True):
    """This decorator overwrites selected inputs with first element of the given input.

    It can be used in two ways:

    1. Wrapping a single request inference callable by chaining with @batch decorator:

        @batch
        @first_value("temperature")
        def infer_fn(**inputs):
            ...
            return result

    2. Wrapping a multiple requests inference callable:

        @first_value("temperature")
        def infer_fn(requests):
            ...
            return results

    By default, the decorator squeezes single value arrays to scalars.
    This behavior can be disabled by setting the `squeeze_single_values` flag to False.

    By default, the decorator checks the equality of the values on selected values.
    This behavior can be disabled by setting the `strict` flag to False.

    Wrapper can only be used with models that support batching.

    Args:
        keys: The input keys selected for conversion.
        squeeze_single_values: squeeze single value ND array to scalar values. Defaults to True.
        strict: enable checking if all values on single selected input of request are equal. Defaults to True.

    Raises:
        PyTritonRuntimeError: if not all values on a single selected input of the request are equal
            and the strict flag is set to True. Additionally, if the decorator is used with a model that doesn't
            support batching,
        PyTritonBadParameterError: if any of the keys passed to the decorator are not allowed.
    """
    if any(k in _SPECIAL_KEYS for k in keys):
        not_allowed_keys = [key for key in keys if key in _SPECIAL_KEYS]
        raise PyTritonBadParameterError(
            f"The keys {', '.join(not_allowed_keys)} are not allowed as keys for @first_value wrapper. "
            f"The set of not allowed keys are {', '.join(_SPECIAL_KEYS)}"
        )

    @wrapt.decorator
    def wrapper(wrapped, instance, args, kwargs):
        model_config = get_model_config(wrapped, instance)
        if not model_config.batching:
            raise PyTritonRuntimeError("The @first_value decorator can only be used with models that support batching.")

        def _replace_inputs_with_first_value(_request):
            for input_name in keys:
                if input_name not in _request:
                    continue
                values = _request[input_name]
                if not isinstance(values, np.ndarray) or values.ndim == 0:
                    continue  # already a single value
                if strict and not _all_values_equal(values):
                    raise PyTritonRuntimeError(
                        f"The values on the {input_name!r} input are not equal. "
                        "To proceed, either disable strict mode in @first_value wrapper "
                        "or ensure that the values always are consistent. "
                        f"The current values of {input_name!r} are {_request[input_name]!r}."
                    )
                _first_value = values[0]
                if (
                    squeeze_single_values
                    and not np.isscalar(_first_value)
                    and all(dim == 1 for dim in np.shape(_first_value))
                ):
                    _first_value = np.squeeze(_first_value)[()]  # scalar (numpy type) from the 0-dim array
                _request[input_name] = _first_value
            return _request

        inputs, _ = _split_context_kwargs(kwargs)
        if inputs:
            kwargs = _replace_inputs_with_first_value(dict(kwargs))
            return wrapped(*args, **kwargs)
        requests, *other_args = args
        requests = [_replace_inputs_with_first_value(request) for request in requests]
        return wrapped(requests, *other_args, **kwargs)

    return wrapper


@wrapt.decorator
def triton_context(wrapped, instance, args, kwargs):
    """Adds triton context.

    It gives you additional argument passed to the function in **kwargs called 'triton_context'.
    You can read model config from it and in the future possibly have some interaction with triton.
    """
    kwargs[TRITON_CONTEXT_FIELD_NAME] = get_triton_context(wrapped, instance)
    return wrapped(*args, **kwargs)
