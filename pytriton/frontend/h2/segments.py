"""A connection's receive segments (core/received.py): where its large uncompressed infer messages are received, so
that their tensors reach the model without a copy.

A message of at least RECEIVE_MIN bytes (and at most `max_bytes`) goes into an idle segment of the connection for its
size (ALIGN bytes more: the message is placed so that its tensors lie aligned, see ReceiveBuffer.message), else into
a new one when a message of this size has arrived in full on this connection before and no segment of the connection
is being filled (so memory grows with bytes received, never with a declared size: a new segment's length has arrived
in full before, and one at a time), else nowhere here: the caller's ordinary buffer takes it. A
connection keeps at most `count` segments for `max_bytes` of messages in all (the oldest go first); a segment it lets go of is
unlinked at once when no request refers to it, else with the end of its last request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytriton.core.received import ALIGN, RECEIVE_MIN

if TYPE_CHECKING:
    from pytriton.core.received import ReceiveBuffer, ReceivedBuffers


class ConnectionSegments:
    __slots__ = ("_arrived", "_count", "_evicted", "_max_bytes", "_received", "segments")

    def __init__(self, received: ReceivedBuffers, count: int, max_bytes: int):
        self._received = received
        self._count = count
        self._max_bytes = max_bytes
        self.segments: list[ReceiveBuffer] = []
        self._evicted: list[ReceiveBuffer] = []  # let go of while a message was being received into them
        self._arrived: dict[int, None] = {}  # sizes of large messages that arrived in full here (the latest few)

    def take(self, length: int) -> memoryview | None:
        """Where a message of `length` bytes is to be received, or None."""
        if not RECEIVE_MIN <= length <= self._max_bytes:
            return None
        segments = self.segments
        for segment in segments:
            if segment.length == length + ALIGN and segment.idle():
                segment.complete = False
                return segment.message(length)
        if length not in self._arrived or self._filling():
            return None
        fresh = self._received.new(length + ALIGN)  # (room to place the message: see ReceiveBuffer.message)
        if fresh is None:
            return None
        segments.append(fresh)
        total = sum(s.length - ALIGN for s in segments)  # message bytes: four 16 MiB messages fit 64 MiB
        while len(segments) > self._count or total > self._max_bytes:
            evicted = segments.pop(0)
            total -= evicted.length - ALIGN
            evicted.discard()
            if evicted.filling():
                self._evicted.append(evicted)
        return fresh.message(length)

    def _filling(self) -> bool:
        """A segment of the connection (kept or let go of) is being filled."""
        self._evicted = [segment for segment in self._evicted if segment.filling()]
        return bool(self._evicted) or any(segment.filling() for segment in self.segments)

    def arrived(self, body: bytearray | memoryview) -> None:
        """A message has arrived in full into `body` (a segment's memory or another buffer)."""
        length = len(body)
        if length < RECEIVE_MIN:
            return
        arrived = self._arrived
        arrived.pop(length, None)
        arrived[length] = None
        if len(arrived) > 2 * self._count:
            del arrived[next(iter(arrived))]
        if isinstance(body, memoryview):
            for segment in self.segments:
                if segment.owns(body):
                    segment.complete = True
                    return

    def drop(self) -> None:
        self._evicted = []
        segments, self.segments = self.segments, []
        for segment in segments:
            segment.discard()
