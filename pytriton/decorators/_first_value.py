"""`@first_value`: batched inputs that carry one value per request turned into that value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import wrapt

from pytriton.decorators._context import SPECIAL_KEYS, get_model_config, split_context_kwargs
from pytriton.decorators._requests import PyTritonRuntimeError
from pytriton.exceptions import PyTritonBadParameterError


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


def first_value(*keys: str, squeeze_single_values: bool = True, strict: bool = True) -> Any:
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
    if any(k in SPECIAL_KEYS for k in keys):
        not_allowed_keys = [key for key in keys if key in SPECIAL_KEYS]
        raise PyTritonBadParameterError(
            f"The keys {', '.join(not_allowed_keys)} are not allowed as keys for @first_value wrapper. "
            f"The set of not allowed keys are {', '.join(SPECIAL_KEYS)}"
        )

    @wrapt.decorator
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        model_config = get_model_config(wrapped, instance)
        if not model_config.batching:
            raise PyTritonRuntimeError("The @first_value decorator can only be used with models that support batching.")

        def _replace_inputs_with_first_value(_request: dict[str, Any]) -> dict[str, Any]:
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

        inputs, _ = split_context_kwargs(kwargs)
        if inputs:
            kwargs = _replace_inputs_with_first_value(dict(kwargs))
            return wrapped(*args, **kwargs)
        requests, *other_args = args
        requests = [_replace_inputs_with_first_value(request) for request in requests]
        return wrapped(requests, *other_args, **kwargs)

    return wrapper
