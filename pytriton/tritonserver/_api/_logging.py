"""`tritonserver._api._logging`: `LogMessage` writes one line into the server log, attributed to its caller."""

from __future__ import annotations

import inspect
import os

from pytriton.tritonserver._c.triton_bindings import TRITONSERVER_LogMessage
from pytriton.tritonserver._enums import LogLevel


def LogMessage(level: LogLevel, message: str) -> None:  # noqa: N802 - NVIDIA's name
    """Log `message` at `level` in the server log, with the caller's file and line (as Triton's does)."""
    frame = inspect.currentframe()
    caller = frame.f_back if frame is not None else None
    filename = caller.f_code.co_filename if caller is not None else os.path.basename(__file__)
    line = caller.f_lineno if caller is not None else 0
    TRITONSERVER_LogMessage(level, filename, line, message)


__all__ = ["LogLevel", "LogMessage"]
