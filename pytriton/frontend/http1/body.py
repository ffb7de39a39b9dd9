"""The buffer a large Content-Length body is received into straight from the socket (one copy on the way in).

It grows with the bytes that arrive, never with the length a client declares: it starts at `FIRST_BLOCK` and
doubles when full, so it holds at most twice what has arrived (plus the first block), and 40 connections that
declare 64 MiB and send nothing hold 64 KiB each, not 2.5 GB. Clients send same-sized tensors over and over: the
connection hands the previous body's buffer in again when it has the same length and nothing refers to it any
more (a warm buffer: no growth, no allocation and zero-fill per request).
"""

from __future__ import annotations

FIRST_BLOCK = 64 * 1024


class DirectBody:
    """`length` bytes to receive; `size` of them have arrived, at the start of `buffer`."""

    __slots__ = ("buffer", "length", "size")

    def __init__(self, length: int, reuse: bytearray | None = None):
        self.length = length
        self.size = 0
        self.buffer = reuse if reuse is not None and len(reuse) == length else bytearray(min(length, FIRST_BLOCK))

    @property
    def complete(self) -> bool:
        return self.size == self.length

    def room(self) -> memoryview:
        """Where the next bytes go (the socket reads into it); the buffer grows first when it is full. Called
        when no view of the buffer is alive, so that it may be resized."""
        buffer = self.buffer
        if self.size == len(buffer):
            grown = min(self.length, 2 * len(buffer))
            buffer.extend(bytes(grown - len(buffer)))
        return memoryview(buffer)[self.size :]

    def received(self, nbytes: int) -> None:
        """The socket wrote `nbytes` into the last `room()`."""
        self.size += nbytes

    def add(self, data: memoryview | bytes) -> int:
        """Copy in what came with other bytes (the head, through the parser); returns how many were taken."""
        take = min(len(data), self.length - self.size)
        end = self.size + take
        self.buffer[self.size : end] = data[:take]  # grows the buffer by what does not fit
        self.size = end
        return take
