"""A connection's transport whose large writes go from their own buffers straight to the socket.

asyncio's socket transport on Python 3.11 copies whatever the socket does not take at once into one growing
bytearray (and again while sending it, as that bytearray shrinks from the front): a 16 MiB tensor costs up to two
copies of itself on top of the kernel's. `DirectWriteTransport` wraps the transport: a large buffer (and whatever
is written after it while it waits) is kept by reference in its own queue and written with `os.writev` on the
socket as far as the kernel takes it; to learn when the socket can take more, the transport is handed a small
slice of the rest (it copies that slice, waits for the socket, sends it and calls `resume_writing`). Bytes go out
in the order they were written. TLS (or any transport without a plain socket) gets no direct path: every write goes
to the transport as before.

With `coalesce`, small writes of one event-loop turn are gathered and handed to the transport as one buffer at the
end of the turn (a `call_soon`): the answers of one batch to the streams of one HTTP/2 connection, and the
acknowledgements of one read, leave in one `send` instead of one each. A gathered write is copied (the caller's
buffer may go back to its owner at once); a large write, `close`, `write_eof` and `abort` hand over (or drop) what
was gathered first, so bytes still go out in the order they were written. Gathered bytes are not counted by
`get_write_buffer_size` (they are not held by reference and wait at most until the end of the turn).

The protocol keeps its contract with asyncio: it routes its `pause_writing`/`resume_writing` through `paused` and
`resumed`, and hears of a pause when the first byte waits and of the resume once nothing waits, queue included, so
that a tensor's owner gets its buffer back only when no byte of it is still to be sent.
"""

from __future__ import annotations

import asyncio
import collections
import os
from typing import Any

LARGE_WRITE = 64 * 1024  # a buffer at least this large is written from where it is
HANDOFF = 16 * 1024  # the slice the transport is given (and copies) to wait for the socket with
IOV_MAX = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024)


def _view(data: Any) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
    return view


class DirectWriteTransport(asyncio.Transport):
    """`transport` with direct socket writes for large buffers; everything else is passed through."""

    def __init__(self, transport: asyncio.Transport, coalesce: bool = False):
        super().__init__()
        self.transport = transport
        self._coalesce = coalesce
        self._gathered: list[bytes] = []  # small writes of this turn (`coalesce`), handed over by `_hand_over`
        self._hand_over_handle: asyncio.Handle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # known at the first gathered write
        sock = transport.get_extra_info("socket")
        plain = sock is not None and transport.get_extra_info("sslcontext") is None
        self._fd = sock.fileno() if plain else -1
        self._queue: collections.deque[memoryview] = collections.deque()
        self._queued = 0
        self._closing = False  # close() asked while bytes wait in the queue
        self._eof = False  # write_eof() asked while bytes wait
        self._reported = False  # the protocol was told of a pause (and not yet of the resume)

    # ---- writing --------------------------------------------------------------------------------------------------
    def write(self, data: Any) -> None:
        size = data.nbytes if isinstance(data, memoryview) else len(data)
        if not size:
            return
        if self._queue:  # behind what waits
            self._queue.append(_view(data) if size >= LARGE_WRITE else memoryview(bytes(data)))
            self._queued += size
            return
        if size < LARGE_WRITE and self._coalesce:
            self._gathered.append(data if type(data) is bytes else bytes(data))
            if self._hand_over_handle is None:
                if self._loop is None:
                    self._loop = asyncio.get_running_loop()
                self._hand_over_handle = self._loop.call_soon(self._hand_over)
            return
        if self._gathered:
            self._hand_over()
        if size < LARGE_WRITE or self._fd < 0 or self.transport.is_closing():
            self.transport.write(data)
            return
        self._queue.append(_view(data))
        self._queued += size
        if not self.transport.get_write_buffer_size():  # else it goes once the transport has sent its bytes
            self._send()

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def _hand_over(self) -> None:
        """Give the transport what this turn gathered, as one buffer."""
        if self._hand_over_handle is not None:
            self._hand_over_handle.cancel()
            self._hand_over_handle = None
        gathered, self._gathered = self._gathered, []
        if gathered and not self.transport.is_closing():
            self.transport.write(gathered[0] if len(gathered) == 1 else b"".join(gathered))

    def _send(self) -> None:
        """Write the queue to the socket while it takes bytes; then give the transport a slice to wait with (the
        caller made sure the transport holds nothing of ours)."""
        queue = self._queue
        transport = self.transport
        while queue:
            if transport.is_closing():
                self._drop()
                return
            iov = [queue[i] for i in range(min(len(queue), IOV_MAX))]
            try:
                sent = os.writev(self._fd, iov)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:  # the connection is broken: the transport finds out on its next write and closes
                sent = -1
            if sent > 0:
                self._consume(sent)
                if sent == sum(view.nbytes for view in iov):
                    continue
            first = queue[0]
            piece = first[:HANDOFF]
            self._consume(piece.nbytes)
            transport.write(piece)  # copied by the transport, which waits for the socket (or sends it now)
            if transport.get_write_buffer_size():
                return  # the transport has told the protocol (`paused`); `resumed` goes on
        self._finish_queue()

    def _consume(self, nbytes: int) -> None:
        queue = self._queue
        self._queued -= nbytes
        while nbytes:
            first = queue[0]
            if first.nbytes <= nbytes:
                nbytes -= first.nbytes
                queue.popleft()
            else:
                queue[0] = first[nbytes:]
                nbytes = 0

    def _finish_queue(self) -> None:
        """The queue is empty: what was asked while it waited is done now."""
        if self._eof:
            self._eof = False
            self.transport.write_eof()
        if self._closing:
            self.transport.close()

    def _drop(self) -> None:
        self._queue.clear()
        self._queued = 0
        self._gathered.clear()
        if self._hand_over_handle is not None:
            self._hand_over_handle.cancel()
            self._hand_over_handle = None

    def lost(self) -> None:
        """The connection is gone: the queue lets go of the buffers it refers to."""
        self._drop()
        self._closing = self._eof = False

    # ---- the protocol's flow control --------------------------------------------------------------------------------
    def paused(self) -> bool:
        """The transport paused writing: True when the protocol is to hear of it (once per pause)."""
        if self._reported:
            return False
        self._reported = True
        return True

    def resumed(self) -> bool:
        """The transport sent everything it held: go on with the queue; True when nothing waits any more and the
        protocol is to hear of it."""
        if self._queue:
            self._send()
            if self._queue or self.transport.get_write_buffer_size():
                return False
        if not self._reported:
            return False
        self._reported = False
        return True

    # ---- the rest of the transport ----------------------------------------------------------------------------------
    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + self._queued

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.transport.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.transport.get_write_buffer_limits()

    def can_write_eof(self) -> bool:
        return self.transport.can_write_eof()

    def write_eof(self) -> None:
        if self._gathered:
            self._hand_over()
        if self._queue:
            self._eof = True
        else:
            self.transport.write_eof()

    def close(self) -> None:
        if self._gathered:
            self._hand_over()
        if self._queue:
            self._closing = True  # after the queue, as asyncio closes after its buffer
        else:
            self.transport.close()

    def is_closing(self) -> bool:
        return self._closing or self.transport.is_closing()

    def abort(self) -> None:
        self._drop()
        self.transport.abort()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def is_reading(self) -> bool:
        return self.transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.transport.get_protocol()
