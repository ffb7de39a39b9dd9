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




class _BoundObject:
    """Stands for the pybind11 object a method is called on, in the "Invoked with" line."""

    def __init__(self, class_name: str) -> None:
        self.class_name = class_name

    def __repr__(self) -> str:
        return f"<{BINDINGS}.{self.class_name} object at 0x{id(self):x}>"


def check_method(class_name: str, method: str, kinds: Sequence[str | type[enum.Enum]], returns: str,
                 *args: Any) -> None:
    """Raise pybind11's TypeError if `args` do not fit `<class_name>.<method>(kinds...)` of Triton's bindings."""
    for kind, value in zip(kinds, args):
        if not (accepts(kind, value) if isinstance(kind, str) else accepts_enum(kind, value)):
            parameters = [("self", f"{BINDINGS}.{class_name}")]
            parameters += [(f"arg{i}", type_name(k)) for i, k in enumerate(kinds)]
            raise incompatible(method, parameters, returns, [_BoundObject(class_name), *args])


__all__ = ["accepts", "accepts_enum", "check_method", "incompatible", "type_name"]
