"""Runtime settings a client may read and change: logging (applied to the server's loggers) and trace."""

from __future__ import annotations

import copy
import logging
from typing import Any, Callable

from pytriton.config.trace import TRACE_LEVELS, TraceConfig
from pytriton.exceptions import ServerError, Status, invalid_arg, unsupported

LOG_FORMATS = {
    "default": "%(asctime)s %(levelname)s %(name)s: %(message)s",
    "ISO8601": "%(asctime)s %(levelname)s %(name)s: %(message)s",
}
_ISO_DATEFMT = "%Y-%m-%dT%H:%M:%S%z"
# tritonserver's refusals of a JSON value of the wrong kind (its TritonJson's words), after "Unable to parse 'KEY': "
NON_ARRAY = "attempt to access JSON non-array as array"
NON_STRING = "attempt to access JSON non-string as string"
NON_UNSIGNED = "attempt to access JSON non-unsigned-integer as unsigned-integer"
NON_BOOLEAN = "attempt to access JSON non-boolean as boolean"
NO_TRACE_FILE = "Attempting to set invalid trace setting :trace file name is not given"


class LogSettings:
    """Triton's logging extension, applied to the `pytriton` loggers of this process."""

    def __init__(self, level: str = "INFO") -> None:
        level_no = logging.getLevelName(level.upper()) if isinstance(level, str) else level
        self.values: dict[str, Any] = {
            "log_file": "",
            "log_info": level_no <= logging.INFO,
            "log_warning": level_no <= logging.WARNING,
            "log_error": level_no <= logging.ERROR,
            "log_verbose_level": 1 if level_no <= logging.DEBUG else 0,
            "log_format": "default",
        }
        self.locked: str | None = None  # why updates are refused (one of several front-end processes)
        self.listeners: list[Callable[[dict[str, Any]], None]] = []  # called with the values after every update

    def get(self) -> dict[str, Any]:
        return dict(self.values)

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Validate and apply a partial update (HTTP JSON or gRPC values); return the new settings."""
        if self.locked:
            raise unsupported(self.locked)
        new = dict(self.values)
        for key, value in changes.items():
            if key == "log_file":
                if value is not None:
                    raise unsupported("log file location can not be updated through network protocol")
                continue
            if value is None or key not in self.values:
                continue  # as Triton: nulls and unknown keys are ignored
            elif key in ("log_info", "log_warning", "log_error"):
                if not isinstance(value, bool):
                    raise invalid_arg(f"Unable to parse '{key}': {NON_BOOLEAN}")
                new[key] = value
            elif key == "log_verbose_level":
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise invalid_arg(f"Unable to parse '{key}': {NON_UNSIGNED}")
                new[key] = value
            elif key == "log_format":
                if not isinstance(value, str):
                    raise invalid_arg(f"Unable to parse '{key}': {NON_STRING}")
                if value not in LOG_FORMATS:
                    raise ServerError(Status.UNAVAILABLE, f"invalid argument for --log_format, got: {value}")
                new[key] = value
        self.values = new
        self.apply()
        for listener in self.listeners:
            listener(self.get())
        return self.get()

    def level(self) -> int:
        v = self.values
        if v["log_verbose_level"] > 0:
            return logging.DEBUG
        if v["log_info"]:
            return logging.INFO
        if v["log_warning"]:
            return logging.WARNING
        if v["log_error"]:
            return logging.ERROR
        return logging.CRITICAL + 1

    def apply(self) -> None:
        root = logging.getLogger("pytriton")
        root.setLevel(self.level())
        datefmt = _ISO_DATEFMT if self.values["log_format"] == "ISO8601" else None
        formatter = logging.Formatter(LOG_FORMATS[self.values["log_format"]], datefmt=datefmt)
        for handler in logging.getLogger().handlers + root.handlers:
            handler.setFormatter(formatter)




class TraceSettings:
    """Triton's trace extension settings, global and per model (a model inherits what it does not set)."""

    def __init__(self, trace_file: str = "") -> None:
        self.global_values: dict[str, Any] = {
            "trace_level": ["OFF"],
            "trace_rate": "1000",
            "trace_count": "-1",
            "log_frequency": "0",
            "trace_file": trace_file,
            "trace_mode": "triton",
        }
        self.model_values: dict[str, dict[str, Any]] = {}
        self.started_with = copy.deepcopy(self.global_values)  # what a cleared global setting goes back to

        self.listeners: list[Callable[[], None]] = []  # called after every change (the tracer's `active` flag)
        self.locked: str | None = None  # why updates are refused (one of several front-end processes)

    @classmethod
    def from_config(cls, config: TraceConfig) -> TraceSettings:
        """The run-time settings (the trace extension's view) that `--trace-config` entries start a server with."""
        settings = cls(config.file)
        settings.global_values.update({
            "trace_level": list(config.level), "trace_rate": str(config.rate), "trace_count": str(config.count),
            "log_frequency": str(config.log_frequency), "trace_mode": config.mode,
        })
        settings.started_with = copy.deepcopy(settings.global_values)
        return settings

    def get(self, model: str | None = None) -> dict[str, Any]:
        values = copy.deepcopy(self.global_values)
        if model:
            values.update(copy.deepcopy(self.model_values.get(model, {})))
        return values

    def update(self, changes: dict[str, Any], model: str | None = None, client: bool = True) -> dict[str, Any]:
        """Apply a partial update (HTTP JSON values; gRPC's as strings and a list for the level), as tritonserver 2.51
        does: None (JSON null / an empty gRPC value) clears a model's setting to the global one and a global setting to
        what the server started with; `trace_mode` is the server's and kept. Unlike Triton, a level it does not know
        and a key it does not know are refused (Triton takes the first as no level, OFF, and ignores the second), and
        so is a negative rate (Triton wraps it around). `client`: a client's update through the trace extension (a
        level without a trace file is refused there, as Triton refuses it), not a model's bound settings."""
        if self.locked:
            raise unsupported(self.locked)
        target = self.model_values.setdefault(model, {}) if model else self.global_values
        staged = dict(target)
        for key, value in changes.items():
            if key == "trace_file":
                raise unsupported("trace file location can not be updated through network protocol")
            if key not in self.global_values:
                raise invalid_arg(f"unknown trace setting '{key}'")
            if key == "trace_mode":
                continue
            if value is None:
                if model:
                    staged.pop(key, None)
                else:
                    staged[key] = copy.deepcopy(self.started_with[key])
                continue
            if key == "trace_level":
                staged[key] = _levels(value)
            else:
                staged[key] = _number(key, value)
        merged = {**(staged if not model else self.global_values), **(staged if model else {})}
        if (client and "trace_level" in changes and merged["trace_mode"] == "triton" and not merged["trace_file"]
                and merged["trace_level"] != ["OFF"]):
            raise invalid_arg(NO_TRACE_FILE)  # (its traces would go nowhere)
        target.clear()
        target.update(staged)
        for listener in self.listeners:
            listener()
        return self.get(model)


def _levels(value: Any) -> list[str]:
    """A `trace_level` update's levels (no level: OFF)."""
    if not isinstance(value, list):
        raise invalid_arg(f"Unable to parse 'trace_level': {NON_ARRAY}")
    if not all(isinstance(level, str) for level in value):
        raise invalid_arg(f"Unable to parse 'trace_level': {NON_STRING}")
    if "OFF" in value and len(value) > 1:
        raise invalid_arg("Expect only one trace level 'OFF' is specified")
    for level in value:
        if level not in TRACE_LEVELS:
            raise invalid_arg(f"invalid trace level '{level}'")
    return list(value) or ["OFF"]


def _number(key: str, value: Any) -> str:
    """A `trace_rate`, `trace_count` or `log_frequency` update (a string of a whole number: -1 or more for the count,
    0 or more for the others)."""
    if not isinstance(value, str):
        raise invalid_arg(f"Unable to parse '{key}': {NON_STRING}")
    try:
        number = int(value)
    except ValueError:
        raise invalid_arg(f"Unable to parse '{key}', got: {value}") from None
    least = -1 if key == "trace_count" else 0
    if number < least:
        raise invalid_arg(f"Unable to parse '{key}'. Expecting value >= {least}, got: {value}")
    return value
