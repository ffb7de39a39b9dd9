"""The `TypeError` pybind11 raises when Triton's bindings get an argument of the wrong type, worded as pybind11 words
it, and the argument checks of its type casters (which Python values each C++ parameter type accepts)."""

from __future__ import annotations

import enum
import numbers
import operator
from collections.abc import Sequence
from typing import Any

BINDINGS = "tritonserver._c.triton_bindings"


def incompatible(function: str, parameters: Sequence[tuple[str, str]], returns: str, args: Sequence[Any]) -> TypeError:
    """pybind11's error for a call no overload accepts: `parameters` are (name, Python type name) pairs."""
    signature = ", ".join(f"{name}: {kind}" for name, kind in parameters)
    invoked = ", ".join(repr(arg) for arg in args)
    return TypeError(f"{function}(): incompatible function arguments. The following argument types are supported:\n"
                     f"    1. ({signature}) -> {returns}\n\nInvoked with: {invoked}")


def accepts(kind: str, value: Any) -> bool:
    """Whether pybind11's caster for a parameter of C++ type `kind` (converting) takes `value`: "str" (std::string),
    "bool", "int" (signed), "uint" (unsigned), "float" (double), or an enum class (that enum's members only)."""
    if kind == "str":
        return isinstance(value, (str, bytes))
    if kind == "bool":  # True/False, None (false), or anything with __bool__ as a number (int, float)
        return value is None or isinstance(value, (bool, numbers.Number))
    if kind in ("int", "uint"):
        if isinstance(value, float):
            return False
        try:
            number = operator.index(value)
        except TypeError:
            return False
        return number >= 0 if kind == "uint" else True
    if kind == "float":
        if isinstance(value, (int, float)):
            return True
        try:
            float(value.__float__())
        except (AttributeError, TypeError, ValueError):
            return False
        return True
    raise ValueError(f"unknown parameter kind {kind}")


def accepts_enum(enum_type: type[enum.Enum], value: Any) -> bool:
    """pybind11 enums take members of their own type only (no implicit conversion from int)."""
    return isinstance(value, enum_type)


def type_name(kind: str | type[enum.Enum]) -> str:
    """How pybind11 names a parameter's type in its signatures."""
    if isinstance(kind, str):
        return {"uint": "int"}.get(kind, kind)
    return f"{BINDINGS}.{kind.__name__}"


__all__ = ["accepts", "accepts_enum", "incompatible", "type_name"]
