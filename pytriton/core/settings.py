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
                    raise invalid_arg(f"expect boolean for '{key}'")
                new[key] = value
            elif key == "log_verbose_level":
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise invalid_arg("expect unsigned integer for 'log_verbose_level'")
                new[key] = value
            elif key == "log_format":
                if value not in LOG_FORMATS:
                    raise ServerError(Status.UNAVAILABLE, f"invalid argument for --log_format, got: {value}")
                new[key] = value
        self.values = new
        self.apply()
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
        return settings

    def get(self, model: str | None = None) -> dict[str, Any]:
        values = copy.deepcopy(self.global_values)
        if model:
            values.update(copy.deepcopy(self.model_values.get(model, {})))
        return values

    def update(self, changes: dict[str, Any], model: str | None = None) -> dict[str, Any]:
        """Apply a partial update; None (JSON null / empty gRPC value) clears a model setting to global."""
        if self.locked:
            raise unsupported(self.locked)
        target = self.model_values.setdefault(model, {}) if model else self.global_values
        staged = dict(target)
        for key, value in changes.items():
            if key == "trace_file":
                raise unsupported("trace file location can not be updated through network protocol")
            if key not in self.global_values:
                raise invalid_arg(f"unknown trace setting '{key}'")
            if value is None:
                if model:
                    staged.pop(key, None)
                    continue
                raise invalid_arg(f"the global '{key}' setting can not be cleared")
            if key == "trace_level":
                levels = [value] if isinstance(value, str) else list(value)
                if "OFF" in levels and len(levels) > 1:
                    raise invalid_arg("Expect only one trace level 'OFF' is specified")
                for level in levels:
                    if level not in TRACE_LEVELS:
                        raise invalid_arg(f"invalid trace level '{level}'")
                staged[key] = levels
            elif key in ("trace_rate", "trace_count", "log_frequency"):
                text = str(value)
                try:
                    number = int(text)
                except ValueError:
                    raise invalid_arg(f"unable to parse '{key}', got: {text}") from None
                if number < (-1 if key == "trace_count" else 0):
                    raise invalid_arg(f"invalid value for '{key}', got: {text}")
                staged[key] = text
            else:
                staged[key] = str(value)
        target.clear()
        target.update(staged)
        for listener in self.listeners:
            listener()
        return self.get(model)
