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

Modules: ``_context`` (``TritonContext``, model config lookup, ``@triton_context``), ``_batch`` (``@batch``,
``@sample``, ``convert_output``), ``_grouping`` (``@group_by_keys``, ``@group_by_values``), ``_padding``
(``@fill_optionals``, ``@pad_batch``, ``ConstantPadder``), ``_first_value``; below them ``_requests`` (types,
batch size), ``_results`` (plain, awaitable and generator results) and ``_stack`` (seeing through wrappers).
"""

from __future__ import annotations

from pytriton.decorators._batch import batch, convert_output, sample
from pytriton.decorators._context import (
    TRITON_CONTEXT_FIELD_NAME,
    ModelConfigDict,
    TritonContext,
    get_model_config,
    get_triton_context,
    triton_context,
)
from pytriton.decorators._first_value import first_value
from pytriton.decorators._text_generator import text_generator
from pytriton.decorators._grouping import group_by_keys, group_by_values
from pytriton.decorators._padding import ConstantPadder, fill_optionals, pad_batch
from pytriton.decorators._requests import (
    InferenceRequest,
    InferenceRequests,
    InferenceResult,
    InferenceResults,
    InputNames,
    PyTritonRuntimeError,
    get_inference_request_batch_size,
)

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
    "text_generator",
    "triton_context",
]
