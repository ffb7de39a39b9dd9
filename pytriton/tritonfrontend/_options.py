"""Checking the front-ends' `Options` as Triton's (pydantic) dataclasses do: each field's type, in pydantic's lax
mode (a numeric string or an integral float for an int, "yes"/"no"/0/1 for a bool; a str must be a str), and its
range. A bad value raises `OptionsError`, a ValueError (as pydantic's ValidationError is), naming the field."""

from __future__ import annotations

import dataclasses
import threading
import warnings
from typing import Any

_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}


class OptionsError(ValueError):
    """An option of a front-end's `Options` has a wrong type or is out of range."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """What a field takes: its type and, for ints, the least value (`ge`) or the value it must exceed (`gt`)."""

    kind: type
    ge: int | None = None
    gt: int | None = None
    le: int | None = None


def _as_int(value: Any) -> int:
    if isinstance(value, int):  # bool too, as pydantic's lax mode
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise TypeError("Input should be a valid integer")


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise TypeError("Input should be a valid boolean")


def _converted(rule: Rule, value: Any) -> Any:
    if rule.kind is bool:
        return _as_bool(value)
    if rule.kind is int:
        number = _as_int(value)
        if rule.ge is not None and number < rule.ge:
            raise TypeError(f"Input should be greater than or equal to {rule.ge}")
        if rule.gt is not None and number <= rule.gt:
            raise TypeError(f"Input should be greater than {rule.gt}")
        if rule.le is not None and number > rule.le:
            raise TypeError(f"Input should be less than or equal to {rule.le}")
        return number
    if not isinstance(value, str):
        raise TypeError("Input should be a valid string")
    return value


def check(options: Any, rules: dict[str, Rule]) -> None:
    """Convert each field of `options` as its rule says (in place); OptionsError listing every bad one."""
    errors = []
    for name, rule in rules.items():
        value = getattr(options, name)
        try:
            object.__setattr__(options, name, _converted(rule, value))
        except TypeError as exc:
            errors.append(f"{name}\n  {exc} [input_value={value!r}, input_type={type(value).__name__}]")
    if errors:
        count = f"{len(errors)} validation error{'s' if len(errors) > 1 else ''}"
        raise OptionsError(f"{count} for {type(options).__qualname__}\n" + "\n".join(errors))


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_inert(options: Any, inert: dict[str, str]) -> None:
    """Warn (once per field and process) of each field of `inert` set to something else than its default."""
    defaults = type(options)()
    owner = type(options).__qualname__
    for name, reason in inert.items():
        if getattr(options, name) == getattr(defaults, name):
            continue
        key = f"{owner}.{name}"
        with _warned_lock:
            if key in _warned:
                continue
            _warned.add(key)
        warnings.warn(f"tritonfrontend {key} is accepted but has no effect: {reason}", UserWarning, stacklevel=4)
