"""Seeing an inference callable through its wrappers: its identity, and which decorators were applied below."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple


class _WrappedWithWrapper(NamedTuple):
    wrapped: Callable[..., Any] | None
    wrapper: Callable[..., Any] | None


def wrapt_stack(wrapped: Any) -> list[_WrappedWithWrapper]:
    """Returns stack of wrapped functions with wrappers applied to inference callable."""
    stack = []
    infer_callable = wrapped
    seen = set()
    while infer_callable is not None and id(infer_callable) not in seen:
        seen.add(id(infer_callable))
        stack.append(_WrappedWithWrapper(infer_callable, getattr(infer_callable, "_self_wrapper", None)))
        infer_callable = getattr(infer_callable, "__wrapped__", None)
    return stack


def has_wrapper_below(wrapped: Any, decorator: Any) -> bool:
    """Whether ``decorator`` (a wrapt decorator of this package) was applied anywhere in ``wrapped``'s stack."""
    targets = (decorator, getattr(decorator, "__wrapped__", None))
    return any(
        item.wrapper is not None and any(item.wrapper is target for target in targets if target is not None)
        for item in wrapt_stack(wrapped)
    )


def callable_key(infer_callable: Any, _depth: int = 0) -> Any:
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
            return ("method", id(owner), callable_key(func, _depth + 1))
        if id(current) in seen:
            break
        seen.add(id(current))
        inner = getattr(current, "__wrapped__", None)
        if inner is None or inner is current:
            break
        current = inner
        _depth += 1
    return ("object", id(current))
