"""Large outputs copied into place by several threads: the worker's copy of a result into a client's system region or
its response arena slot.

One thread copies 16 MiB in about 1.1 ms on the 2-vCPU machine of docs/profile.md (from memory, not cache), and in
the system-shm rows that copy is half of what the instance does per request. numpy's copy releases the GIL, so the
copy is split into contiguous chunks that the calling thread and the endpoint's pool threads take in turn
("Output copies by several threads (issue 21)" in docs/profile.md). Below `DEFAULT_THRESHOLD` one thread is as fast.

PYTRITON_OUTPUT_COPY_THREADS (pytriton/config/env.py's WORKER_VARIABLES document it and check it when a server starts; this
layer cannot import that module) sets the number of threads that copy one output, the caller included: default
min(4, CPUs this process may run on); 1 turns it off.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

logger = logging.getLogger("pytriton.proxy")

THREADS_VARIABLE = "PYTRITON_OUTPUT_COPY_THREADS"
MAX_DEFAULT_THREADS = 4
DEFAULT_THRESHOLD = 8 << 20  # bytes: below it the data is mostly in cache and one thread is as fast (docs/profile.md)
CHUNKS_PER_THREAD = 2  # a copy is split into this many chunks per thread (at least MIN_CHUNK each) ...
MIN_CHUNK = 1 << 20  # ... so that the threads that start first take over the chunks of a late one
_ALIGN = 4096  # chunk boundaries fall on multiples of this many bytes (whole pages of a page-aligned region)
_JOIN_S = 10.0


def default_threads() -> int:
    """min(4, the CPUs this process may run on)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (not Linux)
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_DEFAULT_THREADS, cpus))


def copy_threads(environ: Mapping[str, str] | None = None) -> int:
    """The threads one output copy may use, from PYTRITON_OUTPUT_COPY_THREADS (an integer >= 1) or the default.

    A worker cannot refuse to start over a tuning knob: an invalid value is logged, naming the variable, and the
    default is used."""
    environ = os.environ if environ is None else environ
    text = environ.get(THREADS_VARIABLE)
    if text is None or not text.strip():
        return default_threads()
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        logger.warning("%s=%r: expected an integer >= 1; using %d", THREADS_VARIABLE, text, default_threads())
        return default_threads()
    return value


def _chunks(dst: np.ndarray, src: np.ndarray, count: int) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """At most `count` pairs of (destination, source) views that together cover the arrays once, or None when the
    arrays do not split (then one thread copies them whole).

    Contiguous arrays split into flat ranges of whole pages; others along their first axis at least `count` long, or
    else their longest axis."""
    if src.flags.c_contiguous and dst.flags.c_contiguous:
        flat_dst, flat_src = dst.reshape(-1), src.reshape(-1)
        itemsize = src.itemsize
        unit = _ALIGN // itemsize if itemsize and _ALIGN % itemsize == 0 else 1
        step = -(-src.size // count)
        step = -(-step // unit) * unit
        return [(flat_dst[i:i + step], flat_src[i:i + step]) for i in range(0, src.size, step)]
    if not src.ndim:
        return None
    axis = next((i for i, length in enumerate(src.shape) if length >= count), int(np.argmax(src.shape)))
    length = src.shape[axis]
    step = -(-length // count)
    pairs = []
    for start in range(0, length, step):
        index = (slice(None),) * axis + (slice(start, start + step),)
        pairs.append((dst[index], src[index]))
    return pairs if len(pairs) > 1 else None


class _Call:
    """One split copy. Each thread, the caller first, takes the next chunk nobody has taken until none is left: a
    pool thread that wakes late finds less to do (or nothing), never holds the caller up by more than one chunk."""

    __slots__ = ("pairs", "_next", "_pending", "_lock", "done", "error")

    def __init__(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
        self.pairs = pairs
        self._next = 0
        self._pending = len(pairs)
        self._lock = threading.Lock()
        self.done = threading.Event()
        self.error: BaseException | None = None

    def _take(self) -> tuple[np.ndarray, np.ndarray] | None:
        with self._lock:
            index = self._next
            if index >= len(self.pairs):
                return None
            self._next = index + 1
            return self.pairs[index]

    def run(self) -> None:
        """Copy chunks until none is left to take."""
        while (pair := self._take()) is not None:
            try:
                np.copyto(pair[0], pair[1], casting="no")
            except BaseException as exc:  # noqa: BLE001 - the calling thread raises it
                self.error = self.error or exc
            finally:
                pair = None
                with self._lock:
                    self._pending -= 1
                    if not self._pending:
                        self.done.set()

    def finish(self) -> None:
        """(The caller, once every chunk is written) a pool thread that wakes later finds nothing, and holds no view
        of the destination (a client's region stays mapped while a view of it lives)."""
        with self._lock:
            self.pairs = []


class OutputCopier:
    """Copies an array into a destination of the same shape and dtype; a large one in chunks by several threads.

    The pool threads (named, daemon) start at the first large copy and are stopped and joined by `close`. Several
    threads may call `copy` at once; `close` must not run during a copy."""

    def __init__(self, threads: int | None = None, threshold: int = DEFAULT_THRESHOLD, name: str = "pytriton-copy"):
        self.threads = copy_threads() if threads is None else max(1, threads)
        self.threshold = threshold
        self._name = name
        self._tasks: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._pool: list[threading.Thread] = []
        self._lock = threading.Lock()  # starting and stopping the pool
        self._closed = False

    def copy(self, dst: np.ndarray, src: np.ndarray) -> None:
        """np.copyto(dst, src, casting="no"): `dst` has src's shape and dtype (a view of shared memory)."""
        if self.threads < 2 or src.nbytes < self.threshold or self._closed or np.may_share_memory(dst, src):
            # (overlapping arrays, e.g. an output region over the input the model returned: numpy's one copy
            # reads all of `src` before it writes over it, chunks copied by several threads would not)
            np.copyto(dst, src, casting="no")
            return
        if dst.shape != src.shape:  # (what np.copyto would refuse: never split a broadcast)
            raise ValueError(f"cannot copy an array of shape {src.shape} into one of shape {dst.shape}")
        pairs = _chunks(dst, src, min(self.threads * CHUNKS_PER_THREAD, max(2, src.nbytes // MIN_CHUNK)))
        if pairs is None:
            np.copyto(dst, src, casting="no")
            return
        self._start()
        call = _Call(pairs)
        del pairs
        for _ in range(min(self.threads - 1, len(call.pairs) - 1)):
            self._tasks.put(call)
        try:
            call.run()
        finally:
            call.done.wait()  # the destination is not the caller's again before every chunk is written
            call.finish()
        if call.error is not None:
            raise call.error

    def _start(self) -> None:
        if len(self._pool) == self.threads - 1:
            return
        with self._lock:
            if self._closed:
                return
            while len(self._pool) < self.threads - 1:
                thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._pool) + 1}", daemon=True)
                thread.start()
                self._pool.append(thread)

    def _work(self) -> None:
        tasks = self._tasks
        while True:
            call = tasks.get()
            if call is None:
                return
            call.run()
            call = None

    @property
    def pool(self) -> list[threading.Thread]:
        """The pool threads running now (tests check that `close` leaves none)."""
        return [thread for thread in self._pool if thread.is_alive()]

    def close(self) -> None:
        """Stop and join the pool threads; later copies run in the calling thread."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, []
        for _ in pool:
            self._tasks.put(None)
        for thread in pool:
            thread.join(_JOIN_S)
            if thread.is_alive():
                logger.warning("output copy thread %s did not stop within %.0f s", thread.name, _JOIN_S)

    def __enter__(self) -> OutputCopier:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
