"""Request bodies in memory: the buffer a large body is received into, and what a connection's bodies are charged to
the listener's memory budget (`budget.py`).

A large Content-Length body is received straight from the socket into its own buffer (one copy on the way in). It
grows with the bytes that arrive, never with the length a client declares: it starts at `FIRST_BLOCK` and doubles
when full, so it holds at most twice what has arrived (plus the first block), and 40 connections that declare 64 MiB
and send nothing hold 64 KiB each, not 2.5 GB. Clients send same-sized tensors over and over: the connection hands
the previous body's buffer in again when it has the same length and nothing refers to it any more (a warm buffer:
no growth, no allocation and zero-fill per request).

Every byte a body holds is charged to the budget: a large body's buffer before it grows (the growth step while
memory is plentiful, else its whole remaining length, waited for with reading stopped), other bodies as their bytes
are read (then, if memory is short, reading stops until their remaining length can be charged). The charge goes with
the request until its handler is done, then to the spare buffer (released when the spare is dropped) or back.

With the core's receive buffers (`received`, core/received.py), a large binary infer body (`in_place`: at least
RECEIVE_MIN bytes, not compressed) goes into a server-owned shared-memory segment instead, whose tensors the model then
gets without a copy: the connection's segment when it has this size and is idle, else a new one when the previous
large body on this connection had this size and arrived in full (memory grows with bytes received, never with a
declared size), else ordinary memory as above. The body is placed in its segment so that its binary tensors, after
its JSON header, start on an 8-byte boundary (the model's arrays are views of the segment, and must be aligned). Such a body is charged its whole length while its request holds it
(when the budget has it; else ordinary memory); an idle segment is bounded by the core's total instead.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

from pytriton.core.received import ALIGN, RECEIVE_MIN
from pytriton.frontend.http1.budget import BufferBudget

if TYPE_CHECKING:
    from pytriton.core.received import ReceiveBuffer, ReceivedBuffers

FIRST_BLOCK = 64 * 1024


class DirectBody:
    """`length` bytes to receive; `size` of them have arrived, at the start of `buffer`."""

    __slots__ = ("buffer", "length", "size")

    def __init__(self, length: int, reuse: bytearray | memoryview | None = None, first: int = FIRST_BLOCK):
        self.length = length
        self.size = 0
        # `first` 0: no room yet (memory is short); the bytes that came with the head are added as they are.
        self.buffer: bytearray | memoryview = (
            reuse if reuse is not None and len(reuse) == length else bytearray(min(length, first)))

    @property
    def complete(self) -> bool:
        return self.size == self.length

    @property
    def full(self) -> bool:
        """No room for the next bytes: the buffer has to grow first."""
        return self.size == len(self.buffer)

    def growth(self) -> int:
        """How many bytes the next `grow` adds: the buffer doubles (at least `FIRST_BLOCK`, at most `length`)."""
        size = len(self.buffer)
        return min(self.length, max(FIRST_BLOCK, 2 * size)) - size

    def grow(self) -> None:
        """Called when no view of the buffer is alive, so that it may be resized."""
        assert isinstance(self.buffer, bytearray)  # (a receive segment has its whole length from the start)
        self.buffer.extend(bytes(self.growth()))

    def room(self) -> memoryview:
        """Where the next bytes go (the socket reads into it)."""
        return memoryview(self.buffer)[self.size :]

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


class BodyReceiver(asyncio.BufferedProtocol):
    """The bodies of one connection and their charge to the listener's budget; `RequestReader` reads into them."""

    __slots__ = ("_arrived", "_body", "_body_charge", "_debt", "_direct", "_need", "_segment", "_spare",
                 "_spare_charge", "_waiting", "budget", "received")

    def __init__(self, budget: BufferBudget):
        self.budget = budget  # the listener's, shared by its connections
        self._direct: DirectBody | None = None  # a large body being received
        self._body: list[bytes] = []  # a small or chunked body being received, in the parser's pieces
        self._body_charge = 0  # charged for the body being received: what it holds, or more (a reservation)
        self._spare: bytearray | None = None  # the last large body's buffer, reused once nothing holds it
        self._spare_charge = 0  # what the spare is charged once no request holds it any more (its length)
        self._debt = False  # this read charged bytes that had arrived without asking
        self._waiting = False  # stopped reading until the budget has `_need` bytes for this connection
        self._need = 0
        self.received: ReceivedBuffers | None = None  # the core's receive buffers (set by the listener), if any
        self._segment: ReceiveBuffer | None = None  # the connection's receive segment
        self._arrived = 0  # the length of the last large body that arrived in full

    def _stop_reading(self) -> None:
        """Read nothing more until `_resume` (the connection also stops its head/body deadline)."""
        raise NotImplementedError

    def _resume(self) -> None:
        """Read again (unless something else holds reading): the memory waited for is charged."""
        raise NotImplementedError

    def _hold(self, nbytes: int) -> None:
        """The current body now holds `nbytes`: charge what its charge does not cover (bytes already read)."""
        extra = nbytes - self._body_charge
        if extra > 0:
            self.budget.charge(extra)
            self._body_charge = nbytes
            self._debt = True

    def _body_done(self, size: int) -> int:
        """The body is complete with `size` bytes: its charge, which goes with the request (the rest of a
        reservation is released)."""
        self._hold(size)
        if size >= RECEIVE_MIN:
            self._arrived = size
        charge, self._body_charge = self._body_charge, 0
        if charge > size:
            self.budget.release(charge - size)
        return size

    def _drop_body(self) -> None:
        """The body being received is dropped (refused, too large, connection lost)."""
        self._direct = None
        self._body = []
        charge, self._body_charge = self._body_charge, 0
        if charge:
            self.budget.release(charge)

    def _start_direct(self, size: int, in_place: bool = False, json_size: int = 0) -> None:
        """Receive a large body into its own buffer: a receive segment (`in_place`, see the module's text; its JSON
        header is `json_size` bytes), the spare one (already charged) when it fits, else a first block if the budget
        has it, else no room yet (`_settle_direct` waits for memory)."""
        if in_place and self.received is not None and self._start_segment(size, json_size):
            return
        spare = self._reusable_spare(size)
        if spare is not None:
            self._direct = DirectBody(size, spare)
            self.budget.spare_taken(self)
            self._body_charge, self._spare_charge = self._spare_charge, 0
            return
        self._drop_spare()
        first = min(size, FIRST_BLOCK)
        if not self.budget.try_take(first):
            first = 0
        self._direct = direct = DirectBody(size, first=first)
        self._body_charge = first
        assert isinstance(direct.buffer, bytearray)
        self._spare = direct.buffer

    def _start_segment(self, size: int, json_size: int) -> bool:
        """The body goes into the connection's segment, at the offset that puts its binary tensors (after the JSON
        header) on an ALIGN boundary: the model's arrays are views of the segment (core/received.py)."""
        segment = self._segment
        if segment is None or segment.length != size + ALIGN or not segment.idle():
            if self._arrived != size or self.received is None:
                return False
            fresh = self.received.new(size + ALIGN)
            if fresh is None:
                return False
            if segment is not None:
                segment.discard()  # (unlinked with the end of its last request)
            self._segment = segment = fresh
        if not self.budget.try_take(size):
            return False
        if self._spare is not None and len(self._spare) == size:
            self._drop_spare()  # the segment takes its place
        pad = -json_size % ALIGN
        self._direct = DirectBody(size, segment.memory()[pad : pad + size])
        self._body_charge = size
        return True

    def _reusable_spare(self, size: int) -> bytearray | None:
        """The previous large body's buffer when it has this size and no request, tensor view or message refers
        to it any more (clients send same-sized tensors over and over)."""
        spare = self._spare
        if (
            spare is not None
            and len(spare) == size
            and self._spare_charge == size
            and sys.getrefcount(spare) == 3  # attribute, local, argument
        ):
            return spare
        return None

    def _grow_direct(self) -> None:
        """Before the socket reads into a full large body (no view of it is alive then): grow it, within what
        `_settle_direct` charged."""
        direct = self._direct
        assert direct is not None
        direct.grow()
        self._hold(len(direct.buffer))

    def _settle_direct(self) -> None:
        """After a read into a large body: when its buffer is full, its next growth has to be charged: the step
        while memory is plentiful, else its whole remaining length, waited for with reading stopped."""
        direct = self._direct
        assert direct is not None
        self._hold(len(direct.buffer))  # what the head's read added to it
        self._debt = False
        if direct.full:
            step = len(direct.buffer) + direct.growth() - self._body_charge
            if step > 0:
                if self.budget.try_take(step):
                    self._body_charge += step
                else:
                    self._wait_for_memory(direct.length - self._body_charge)

    def _wait_for_memory(self, need: int) -> bool:
        """Charge `need` more for this connection, or stop reading until the budget can (False)."""
        if self.budget.wait(self, need, self._body_charge):
            self._body_charge += need
            return True
        self._need = need
        self._waiting = True
        self._stop_reading()
        return False

    def budget_granted(self) -> None:
        """The budget has charged what this connection waited for: read on."""
        self._waiting = False
        self._body_charge += self._need
        self._need = 0
        self._resume()

    def give_up_spare(self) -> int:
        charge, self._spare_charge = self._spare_charge, 0
        self._spare = None
        return charge

    def _drop_spare(self) -> None:
        self._spare = None
        if self._spare_charge:
            self.budget.spare_taken(self)
            self.budget.release(self.give_up_spare())

    def _request_done(self, body: object, charge: int) -> None:
        """A handler is done with a request whose body was charged `charge`: the charge stays with the body if it
        becomes the spare buffer (nobody waits for memory), else it is released."""
        if not charge:
            return
        if body is not None and body is self._spare and self.budget.keep_spare(self):
            self._spare_charge = charge
        else:
            if body is not None and body is self._spare:
                self._spare = None
            self.budget.release(charge)

    def _release_all(self) -> None:
        """The connection ends: it waits no more and lets go of its body and spare buffer."""
        if self._waiting:
            self._waiting = False
            self.budget.leave(self)
        self._drop_body()
        self._drop_spare()
        segment, self._segment = self._segment, None
        if segment is not None:
            segment.discard()
