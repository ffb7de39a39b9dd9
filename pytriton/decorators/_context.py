"""The triton context of a bound inference callable and the model config it registers; `@triton_context`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, cast

import wrapt

from pytriton.decorators._stack import callable_key
from pytriton.exceptions import PyTritonValidationError
from pytriton.model_config.triton_model_config import TritonModelConfig

#: Name of the keyword argument ``@triton_context`` passes (``pytriton.constants.TRITON_CONTEXT_FIELD_NAME``).
TRITON_CONTEXT_FIELD_NAME = "triton_context"

# keyword arguments that are never model inputs (PyTriton's list; used in error messages as PyTriton does)
SPECIAL_KEYS = ["__triton_context__"]


class _ModelConfigNotFoundError(PyTritonValidationError, KeyError):
    """No model config for a callable (PyTriton lets the KeyError of the config dict through)."""

    def __str__(self) -> str:
        return self.message


def _is_context_kwarg(name: str, value: Any) -> bool:
    """Whether a keyword argument is the triton context rather than a model input."""
    return name in SPECIAL_KEYS or (name == TRITON_CONTEXT_FIELD_NAME and isinstance(value, TritonContext))


def split_context_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    inputs = {k: v for k, v in kwargs.items() if not _is_context_kwarg(k, v)}
    others = {k: v for k, v in kwargs.items() if _is_context_kwarg(k, v)}
    return inputs, others


class ModelConfigDict(MutableMapping[Callable[..., Any], TritonModelConfig]):
    """Dictionary for storing model configs for inference callable.

    Keys are inference callables; a callable and any ``wrapt`` wrapper of it map to the same entry, as do the
    bound methods ``obj.infer`` obtained by separate attribute accesses. The registered callables are kept
    referenced (and returned by iteration), so identity-based keys stay valid.
    """

    def __init__(self) -> None:
        """Create ModelConfigDict object."""
        self._data: dict[Any, TritonModelConfig] = {}
        self._callables: dict[Any, Callable[..., Any]] = {}

    @staticmethod
    def _get_model_config_key(infer_callable: Callable[..., Any]) -> Any:
        """Prepares TritonModelConfig dictionary key for function/callable."""
        return callable_key(infer_callable)

    def __getitem__(self, infer_callable: Callable[..., Any]) -> TritonModelConfig:
        """Get model config for inference callable."""
        return self._data[self._get_model_config_key(infer_callable)]

    def __setitem__(self, infer_callable: Callable[..., Any], item: TritonModelConfig) -> None:
        """Set model config for inference callable."""
        key = self._get_model_config_key(infer_callable)
        self._callables.setdefault(key, infer_callable)
        self._data[key] = item

    def __delitem__(self, infer_callable: Callable[..., Any]) -> None:
        """Delete model config for inference callable."""
        key = self._get_model_config_key(infer_callable)
        del self._data[key]
        del self._callables[key]

    def __len__(self) -> int:
        """Get number of inference callable keys."""
        return len(self._data)

    def __iter__(self) -> Iterator[Callable[..., Any]]:
        """Iterate over inference callable keys."""
        return iter(list(self._callables.values()))

    def __repr__(self) -> str:
        entries = ", ".join(f"{c!r}: {cfg.model_name!r}" for c, cfg in zip(self, self._data.values()))
        return f"ModelConfigDict({{{entries}}})"


@dataclasses.dataclass
class TritonContext:
    """Triton context definition class."""

    model_configs: ModelConfigDict = dataclasses.field(default_factory=ModelConfigDict)


def get_triton_context(wrapped: Any, instance: Any) -> TritonContext:
    """Retrieves triton context from callable.

    It is used in @triton_context to get triton context registered by triton binding in inference callable.
    If you use @triton_context decorator you do not need this function.
    """
    for caller in (instance, wrapped):
        if caller is None:
            continue
        context = getattr(caller, "__triton_context__", None)
        if context is not None:
            return cast(TritonContext, context)
    raise PyTritonValidationError("Wrapped function or object must bound with triton to get  __triton_context__")


def get_model_config(wrapped: Any, instance: Any) -> TritonModelConfig:
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


@wrapt.decorator
def triton_context(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Adds triton context.

    It gives you additional argument passed to the function in **kwargs called 'triton_context'.
    You can read model config from it and in the future possibly have some interaction with triton.
    """
    kwargs[TRITON_CONTEXT_FIELD_NAME] = get_triton_context(wrapped, instance)
    return wrapped(*args, **kwargs)
