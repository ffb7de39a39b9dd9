"""Triton's JSON trace file: finished traces are buffered and written by a thread of their own, never by the event
loop; with a log frequency N every N traces go to `<file>.<index>`, else all of them to `<file>` at stop."""

from __future__ import annotations

import logging
import os
import queue
import threading
from typing import Callable

import orjson

from pytriton.core.trace import Trace

logger = logging.getLogger("pytriton.core")

# Traces held in memory for the file written at stop (log frequency 0); ~700 bytes each. Past it new traces are
# dropped (with one warning): a client that may change trace settings must not be able to grow memory without bound.
MAX_HELD_TRACES = 100_000


def trace_entries(trace: Trace) -> bytes:
    """One trace as Triton writes it: its identity object, then one object holding its timestamps."""
    try:
        version: int | str = int(trace.model_version)
    except ValueError:
        version = trace.model_version
    head = {"id": trace.id, "model_name": trace.model_name, "model_version": version, "request_id": trace.request_id,
            "parent_id": trace.parent_id}
    stamps = {"id": trace.id, "timestamps": [{"name": name, "ns": ns} for name, ns in trace.timestamps]}
    return orjson.dumps(head) + b"," + orjson.dumps(stamps)


class TraceFileWriter:
    """The `TraceSink` of mode `triton`. `log_frequency` is read at each trace (it may change at run time)."""

    def __init__(self, path: str, log_frequency: Callable[[], int], max_held: int = MAX_HELD_TRACES):
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
            raise RuntimeError(f"cannot write the trace file '{path}': '{directory}' is not a writable directory")
        self.path = path
        self.max_held = max_held
        self.dropped = 0
        self.log_frequency = log_frequency
        self.index = 0  # of the next `<file>.<index>`
        self._pending: list[bytes] = []
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[str, list[bytes]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="pytriton-trace-writer", daemon=True)
        self._thread.start()
        self._closed = False

    def submit(self, trace: Trace) -> None:
        entry = trace_entries(trace)
        frequency = self.log_frequency()
        with self._lock:
            if frequency <= 0 and len(self._pending) >= self.max_held:
                if not self.dropped:
                    logger.warning("%d traces wait for the trace file '%s' (written at stop); further traces are "
                                   "dropped: set a log frequency (--trace-config triton,log-frequency=N) or a count",
                                   self.max_held, self.path)
                self.dropped += 1
                return
            self._pending.append(entry)
            if frequency > 0 and len(self._pending) >= frequency:
                batch, self._pending = self._pending, []
                self._jobs.put((f"{self.path}.{self.index}", batch))
                self.index += 1

    def close(self) -> None:
        """Write what is left (all traces to `<file>` without a log frequency), then end the writer thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            batch, self._pending = self._pending, []
            if self.log_frequency() <= 0:
                self._jobs.put((self.path, batch))
            elif batch:
                self._jobs.put((f"{self.path}.{self.index}", batch))
                self.index += 1
            self._jobs.put(None)
        self._thread.join()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            path, batch = job
            try:
                _write_atomically(path, b"[" + b",".join(batch) + b"]")
            except OSError as exc:
                logger.error("cannot write the trace file '%s': %s", path, exc)


def _write_atomically(path: str, data: bytes) -> None:
    """Write `data` to a temporary file beside `path` and rename it: a reader never sees a partial file."""
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "wb") as out:
        out.write(data)
    os.replace(temporary, path)


__all__ = ["TraceFileWriter", "trace_entries"]
