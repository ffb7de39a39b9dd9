"""Runs a PyTriton-style inference callable inside a worker and checks what it returns.

The callable receives `List[Request]` and returns `List[Dict[str, ndarray]]`, one dict per request;
`async def` callables run on a loop owned by the backend.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
from typing import Any, Callable, Iterator

import numpy as np

from pytriton.model_config.datatypes import TRITON_TO_NUMPY, numpy_to_triton
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.types import Request

logger = logging.getLogger("pytriton.backends")


class InferenceCallableError(Exception):
    """The callable failed or returned something that does not match the model's outputs."""


def load_callable(target: str) -> Callable[..., Any]:
    """Import `module:attr` (attr may be dotted, e.g. `module:Model.infer`)."""
    module_name, sep, attr_path = target.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"inference callable must be given as 'module:callable', got '{target}'")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"module '{module_name}' has no attribute '{attr_path}'") from None
    if not callable(obj):
        raise ValueError(f"'{target}' is not callable")
    return obj


def _cast_output(array: Any, wanted: str, datatype: str) -> tuple[Any, str]:
    """Non-strict mode: cast to the declared dtype when numpy deems it safe or same-kind (e.g. FP64 -> FP32)."""
    if wanted == "BYTES" or datatype == "BYTES" or not isinstance(array, np.ndarray):
        return array, datatype
    target = TRITON_TO_NUMPY[wanted]
    if np.can_cast(array.dtype, target, casting="same_kind"):
        return array.astype(target), wanted
    return array, datatype


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

    def iterate(self, result: Any) -> Iterator[Any]:
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

    def check_outputs(
        self, requests: list[Request], responses: Any
    ) -> list[tuple[list[tuple[str, str, np.ndarray]], str, dict[str, Any]]]:
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
        checked = []
        batched = self.config.batching
        for request, response in zip(requests, responses):
            if not isinstance(response, dict):
                raise InferenceCallableError(
                    f"inference callable of model '{model}' must return dicts of numpy arrays, "
                    f"got {type(response).__name__}"
                )
            wanted = request.requested_output_names or [name for name in response if name in self.config.output_by_name]
            outputs = []
            for name in response:
                if name not in self.config.output_by_name:
                    raise InferenceCallableError(
                        f"inference callable of model '{model}' returned output '{name}', which the model does "
                        f"not declare (declared: {sorted(self.config.output_by_name)})"
                    )
            for name in wanted:
                spec = self.config.output_by_name[name]
                if name not in response:
                    raise InferenceCallableError(
                        f"inference callable of model '{model}' did not return requested output '{name}'"
                    )
                array = response[name]
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
            checked.append((outputs, "", {}))
        return checked

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None
