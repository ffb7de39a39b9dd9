"""Runs a PyTriton-style inference callable inside a worker and checks what it returns.

The callable receives `List[Request]` and returns `List[Dict[str, ndarray]]`, one dict per request;
`async def` callables run on a loop owned by the backend.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Callable, Generator, Sequence
from typing import Any, cast

import numpy as np

from pytriton.backends.target import CallableTarget, resolve
from pytriton.model_config.datatypes import TRITON_TO_NUMPY, numpy_to_triton
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.types import Request

logger = logging.getLogger("pytriton.backends")


# One request's answer as the worker sends it: (outputs as (name, datatype, array), error, response parameters).
CheckedResponse = tuple[list[tuple[str, str, Any]], str, dict[str, Any]]


@dataclasses.dataclass(slots=True)
class StreamStep:
    """One message of a stream whose requests are answered each on its own (a decoupled Python-backend model's
    batch): per request its response or None (nothing for it in this message), and whether it is its last."""

    responses: list[Any]
    finals: list[bool]


class InferenceCallableError(Exception):
    """The callable failed or returned something that does not match the model's outputs."""


def load_callable(target: str, device: str = "cpu") -> Callable[..., Any]:
    """Import `module:attr` or `path/to/file.py:attr` (attr may be dotted); a class (`module:Model`, or
    `module:Model.infer` for a method) is instantiated, with `device` if its __init__ takes a `device` parameter."""
    return cast(Callable[..., Any], resolve(CallableTarget.parse(target)).instantiate(device))


def _cast_output(array: Any, wanted: str, datatype: str) -> tuple[Any, str]:
    """Non-strict mode: cast to the declared dtype when numpy deems it safe or same-kind (e.g. FP64 -> FP32)."""
    if wanted == "BYTES" or datatype == "BYTES" or not isinstance(array, np.ndarray):
        return array, datatype
    target = TRITON_TO_NUMPY[wanted]
    if np.can_cast(array.dtype, target, casting="same_kind"):
        return array.astype(target), wanted
    return array, datatype


def _missing_output(model: str, name: str, listed: bool) -> str:
    if listed:
        return f"inference callable of model '{model}' did not return requested output '{name}'"
    return (
        f"inference callable of model '{model}' did not return output '{name}' (the request lists no outputs, so "
        "every output the model declares is expected)"
    )


def _shape_matches(spec: TensorSpec, shape: tuple[int, ...], batched: bool) -> bool:
    dims = shape[1:] if batched else shape
    if batched and len(shape) < 1:
        return False
    if len(dims) != len(spec.shape):
        return False
    return all(want == -1 or want == got for want, got in zip(spec.shape, dims))


def inject_triton_context(infer_func: Any, config: TritonModelConfig) -> None:
    """Give decorators like @fill_optionals and @triton_context the model config, as PyTriton does."""
    try:
        from pytriton.decorators import TritonContext  # noqa: PLC0415 - decorators are optional for a callable
    except ImportError:
        return
    owner = getattr(infer_func, "__self__", None) or infer_func
    context = getattr(owner, "__triton_context__", None)
    if context is None:
        context = TritonContext()
        try:
            setattr(owner, "__triton_context__", context)
        except (AttributeError, TypeError):
            return
    context.model_configs[infer_func] = config


class CallableBackend:
    """Calls the user's function on a batch of requests and validates the outputs against the config."""

    def __init__(self, infer_func: Callable[..., Any], config: TritonModelConfig):
        self.infer_func = infer_func
        self.config = config
        self._loop: asyncio.AbstractEventLoop | None = None

    def _loop_for(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def __call__(self, requests: list[Request]) -> Any:
        """Call the function; a coroutine is run to completion on the backend's own loop."""
        result = self.infer_func(requests)
        if inspect.isawaitable(result):
            result = self._loop_for().run_until_complete(result)
        return result

    def iterate(self, result: Any) -> Generator[Any, None, None]:
        """The responses of a call: one list, or each list a (sync or async) generator yields."""
        if inspect.isgenerator(result):
            try:
                yield from result
            finally:
                result.close()
        elif inspect.isasyncgen(result):
            loop = self._loop_for()
            try:
                while True:
                    try:
                        yield loop.run_until_complete(result.__anext__())
                    except StopAsyncIteration:
                        return
            finally:
                loop.run_until_complete(result.aclose())
        else:
            yield result

    def check_outputs(self, requests: list[Request], responses: Any) -> Sequence[CheckedResponse | None]:
        """Check the callable's result; return per request (outputs to send, error, parameters)."""
        model = self.config.model_name
        if not isinstance(responses, (list, tuple)):
            raise InferenceCallableError(
                f"inference callable of model '{model}' must return a list of dicts (one per request), "
                f"got {type(responses).__name__}"
            )
        if len(responses) != len(requests):
            raise InferenceCallableError(
                f"inference callable of model '{model}' returned {len(responses)} responses "
                f"for {len(requests)} requests"
            )
        checked: list[CheckedResponse] = []
        batched = self.config.batching
        # (name, dtype, shape) of arrays found right in this call, with their datatype: the rows of a batch split by
        # @batch are views of one output each, checked once
        passed: dict[tuple[str, Any, Any], str] = {}
        for request, response in zip(requests, responses):
            if not isinstance(response, dict):
                raise InferenceCallableError(
                    f"inference callable of model '{model}' must return dicts of numpy arrays, "
                    f"got {type(response).__name__}"
                )
            for name in response:
                if name not in self.config.model_output_by_name:
                    raise InferenceCallableError(
                        f"inference callable of model '{model}' returned output '{name}', which the model does "
                        f"not declare (declared: {sorted(self.config.output_by_name)})"
                    )
            listed = request.requested_output_names
            outputs = []
            for name in listed or self.config.output_by_name:
                spec = self.config.model_output_by_name[name]
                if name not in response:
                    raise InferenceCallableError(_missing_output(model, name, bool(listed)))
                array = response[name]
                if type(array) is np.ndarray:
                    known = passed.get((name, array.dtype, array.shape))
                    if known is not None:
                        outputs.append((name, known, array))
                        continue
                if not isinstance(array, np.ndarray) and not hasattr(array, "__cuda_array_interface__"):
                    raise InferenceCallableError(
                        f"output '{name}' of model '{model}' must be a numpy array, got {type(array).__name__}"
                    )
                try:
                    datatype = numpy_to_triton(array.dtype)
                except TypeError:
                    datatype = f"numpy {array.dtype}"
                if datatype != spec.datatype and not self.config.strict:
                    array, datatype = _cast_output(array, spec.datatype, datatype)
                if datatype != spec.datatype:
                    raise InferenceCallableError(
                        f"output '{name}' of model '{model}' has datatype {datatype} (numpy {array.dtype}), "
                        f"but the model declares {spec.datatype}"
                    )
                if not _shape_matches(spec, array.shape, batched):
                    expected = ([-1] if batched else []) + list(spec.shape)
                    raise InferenceCallableError(
                        f"output '{name}' of model '{model}' has shape {list(array.shape)}, "
                        f"but the model declares {expected}"
                    )
                outputs.append((name, datatype, array))
                if type(array) is np.ndarray:
                    passed[(name, array.dtype, array.shape)] = datatype
            checked.append((outputs, "", {}))
        return checked

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None
