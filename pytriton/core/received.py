"""Server-owned shared memory that large request messages are received into (issue 21).

A front-end's connection receives a large message (at least `RECEIVE_MIN` bytes) straight from the socket into a
`ReceiveBuffer`: a POSIX shared-memory segment of the server (made by the transport, named with the server's prefix,
so the start-up sweep and the tests' /dev/shm checks cover it), recorded in the shm registry as a region of the
server's own. The front-end parses the message as it would any buffer; its tensors are views of the segment. When the
core resolves a request (`regions_resolve.execution_request`), a tensor lying in a receive buffer is handed to the
instance by (region, offset, size), exactly as a tensor in a client's system shared-memory region: the worker maps the
segment once and keeps it mapped, and no server copy into the request arena is made.

A buffer is reused for a later message only when it is idle: no request refers to it (the registry's count, which
every job holds from submission to its end, whatever way it ends) and no Python view of it is alive any more (the
front-end's message, the parsed request and its tensors; the same test as the front-ends' spare bytearrays). A
discarded buffer (connection closed or idle, evicted, server stop) is unlinked at once when idle, else with the end of
its last request; the transport's arena unlinks whatever is left when the server stops.

Which connection may make a new buffer, and of which size, is the front-end's rule (memory grows with bytes received,
never with a declared size); here is the server-wide bound, `RECEIVE_TOTAL_MAX` bytes of receive buffers at once
(docs/security.md): past it, messages are received into ordinary memory as before.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import traceback
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from pytriton.model_config.datatypes import ITEMSIZE

if TYPE_CHECKING:
    from pytriton.core.shm_registry import SharedMemoryRegistry, SystemShmRegion

logger = logging.getLogger("pytriton.core")

RECEIVE_MIN = 256 * 1024  # a message at least this large may be received into a receive buffer
TENSOR_MIN = 64 * 1024  # a tensor at least this large in a receive buffer is passed by reference (smaller: copied)
RECEIVE_TOTAL_MAX = 1 << 30  # the most bytes of receive buffers the server holds at once
ALIGN = 8  # a tensor passed by reference lies at an offset aligned for its datatype (a message may be placed ALIGN on)


class SegmentSource(Protocol):
    """What the transport gives the core to make receive segments with."""

    def allocate(self, nbytes: int) -> tuple[str, int, memoryview]:
        """A new segment of at least `nbytes`, its pages reserved: (POSIX key, handle for `free`, writable view of
        `nbytes`). Raises (MemoryError, OSError, ...) when none can be made."""

    def free(self, handle: int) -> None:
        """Unmap (once no view is alive) and unlink a segment."""


class ReceiveBuffer:
    """One receive segment: `memory()` to receive into; `idle()` says whether it may take a new message."""

    __slots__ = ("_exporter", "_baseline", "address", "complete", "handle", "length", "next_pad", "pad", "pool",
                 "region")

    def __init__(self, pool: ReceivedBuffers, handle: int, view: memoryview, region: SystemShmRegion):
        self.pool = pool
        self.handle = handle
        self.length = len(view)
        self.region = region
        self.complete = False  # the last message received into it has arrived in full
        self.pad = 0  # where the message (`message`) starts in it
        self.next_pad = 0  # where the next one is to start (see `message`)
        # Every view handed out is a view of this object: its reference count tells whether one is still alive.
        self._exporter = (ctypes.c_ubyte * self.length).from_buffer(view)
        self.address = ctypes.addressof(self._exporter)
        self._baseline = sys.getrefcount(self._exporter)

    def memory(self) -> memoryview:
        """A writable view of the whole buffer (format "B")."""
        return memoryview(self._exporter).cast("B")

    def message(self, length: int) -> memoryview:
        """Where the next message of `length` bytes (at most `self.length - ALIGN`) is to be received: at `next_pad`,
        which `ReceivedBuffers.where` sets when a tensor of the previous message lay unaligned for its datatype (a
        client sends the same header over and over: its tensors then lie aligned, and are passed by reference)."""
        self.pad = pad = self.next_pad
        return self.memory()[pad : pad + length]

    def owns(self, view: Any) -> bool:
        return getattr(view, "obj", None) is self._exporter

    def idle(self) -> bool:
        """No request refers to it and no view of it is alive: a new message may overwrite it."""
        region = self.region
        return region.in_use == 0 and not region.removing and sys.getrefcount(self._exporter) == self._baseline

    def filling(self) -> bool:
        """A message is being received into it: it has not arrived in full, and the receiver still holds it."""
        return not self.complete and not self.gone and sys.getrefcount(self._exporter) > self._baseline

    @property
    def gone(self) -> bool:
        return self.region.on_gone is None

    def discard(self) -> None:
        """No longer wanted: unlinked now when no request refers to it, else when the last one ends."""
        self.pool.registry.remove_owned(self.region)


class ReceivedBuffers:
    """The server's receive buffers: made for the front-ends, looked up by the core for each request's tensors."""

    def __init__(self, registry: SharedMemoryRegistry, limit: int = RECEIVE_TOTAL_MAX):
        self.registry = registry
        self.limit = limit
        self.total = 0
        self._source: SegmentSource | None = None
        self._buffers: dict[int, ReceiveBuffer] = {}  # id(exporter) -> its buffer, while its segment lives

    def attach(self, source: SegmentSource | None) -> None:
        """Receive buffers are made from `source` from now on (None: none are made)."""
        self._source = source

    @property
    def enabled(self) -> bool:
        return self._source is not None

    def new(self, length: int) -> ReceiveBuffer | None:
        """A new receive buffer of `length` bytes, or None (no source, too small, the server-wide bound reached, or
        the segment could not be made: /dev/shm full, say)."""
        source = self._source
        if source is None or length < RECEIVE_MIN or self.total + length > self.limit:
            return None
        try:
            key, handle, view = source.allocate(length)
        except Exception as exc:  # noqa: BLE001 - any failure: the message is received into ordinary memory
            logger.debug("no receive segment of %d bytes: %s", length, exc)
            return None
        box: list[ReceiveBuffer] = []
        region = self.registry.own_system(key, length, lambda: self._gone(box[0]))
        buffer = ReceiveBuffer(self, handle, view, region)
        box.append(buffer)
        del view
        self._buffers[id(buffer._exporter)] = buffer
        self.total += length
        return buffer

    def _gone(self, buffer: ReceiveBuffer) -> None:
        self._buffers.pop(id(buffer._exporter), None)
        self.total -= buffer.length
        source = self._source
        buffer._exporter = None  # type: ignore[assignment]  # (views still alive keep the mapping)
        if source is not None:
            try:
                source.free(buffer.handle)
            except Exception:  # noqa: BLE001
                logger.exception("freeing a receive segment")

    def where(self, data: Any, datatype: str = "") -> tuple[SystemShmRegion, int] | None:
        """(region, offset) of a tensor whose bytes lie in a live receive buffer (and that is large enough to be
        passed by reference, at an offset aligned for its `datatype`: the model's arrays are views of the segment,
        and where the message put the tensor is the client's header's doing), else None (the tensor is copied)."""
        buffer = self._buffers.get(id(getattr(data, "obj", None)))
        if buffer is None or not buffer.owns(data) or buffer.region.removing:
            return None
        if data.nbytes < TENSOR_MIN or not data.contiguous:
            return None
        offset = np.frombuffer(data, dtype=np.uint8).ctypes.data - buffer.address
        if offset < 0 or offset + data.nbytes > buffer.length:
            return None
        if offset % ITEMSIZE.get(datatype, 1):
            buffer.next_pad = (buffer.pad - offset) % ALIGN  # (the tensor lies `offset - pad` into the message)
            return None
        return buffer.region, offset

    def close(self) -> None:
        """The server stops: every buffer goes (now, or with its last request)."""
        for buffer in list(self._buffers.values()):
            buffer.discard()
        self._source = None


def drop_frames(exc: BaseException | None) -> None:
    """Let go of the frames the traceback of a request's error holds (and of its cause or context): they are often in a
    reference cycle with the future that carried the error, and with them the request and its tensors' views of a
    receive buffer, which would not be idle again until the cyclic garbage collector ran. For errors that are answered
    with their status (nothing logs their traceback)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if exc.__traceback__ is not None:
            traceback.clear_frames(exc.__traceback__)  # (a frame still running keeps its locals)
            exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__
