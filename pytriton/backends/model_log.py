"""The server's logging settings as a model's `pb_utils.Logger` follows them in its worker process.

Triton's stub hands a model's log lines to the server, which shows them as its logging settings say (the logging
extension: `POST /v2/logging`, gRPC LogSettings): INFO lines while `log_info` is on, WARNING while `log_warning`,
ERROR while `log_error`, VERBOSE while `log_verbose_level` is 1 or more. Here a model logs in its own process: the
server writes its settings to a file of its run directory whenever a client changes them, and each worker's
`ModelLogGate` reads that file again when it changed (one `stat` per line logged). Until a client changes them,
the worker's own logging level (the server's `--log-level`) decides, as it did.
"""

from __future__ import annotations

import json
import os
from typing import Any

MODEL_LOG_FILE = "model_log_settings.json"  # in the server's run directory
# The settings key that shows lines of each pb_utils.Logger level (INFO 0, WARNING 1, ERROR 2; VERBOSE 3 by level)
_SWITCHES = {0: "log_info", 1: "log_warning", 2: "log_error"}


def write_model_log_settings(path: str, values: dict[str, Any]) -> None:
    """Write the server's logging `values` (LogSettings.get()) for the workers, whole or not at all."""
    scratch = f"{path}.{os.getpid()}.tmp"
    with open(scratch, "w") as file:
        json.dump({key: values[key] for key in (*_SWITCHES.values(), "log_verbose_level")}, file)
    os.replace(scratch, path)


class ModelLogGate:
    """Whether a model's log line of a given level is shown, by the settings the server last wrote to `path` (None
    before it wrote any: the worker's logging level decides)."""

    def __init__(self, path: str):
        self.path = path
        self._seen: tuple[int, int] | None = None  # (inode, mtime) of the file read last
        self._values: dict[str, Any] | None = None

    def allows(self, level: int) -> bool | None:
        """For a pb_utils.Logger level (INFO 0, WARNING 1, ERROR 2, VERBOSE 3): shown or not; None: no settings
        written yet."""
        values = self._current()
        if values is None:
            return None
        switch = _SWITCHES.get(level)
        return bool(values.get(switch)) if switch is not None else int(values.get("log_verbose_level", 0)) > 0

    def _current(self) -> dict[str, Any] | None:
        try:
            stat = os.stat(self.path)
        except OSError:
            return self._values  # (none yet, or the run directory is going away: as last read)
        seen = (stat.st_ino, stat.st_mtime_ns)
        if seen != self._seen:
            try:
                with open(self.path) as file:
                    self._values = json.load(file)
                self._seen = seen
            except (OSError, ValueError):
                pass  # (replaced as it was read: read again at the next line)
        return self._values
