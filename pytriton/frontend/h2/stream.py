"""The life of one HTTP/2 stream on the server side, as an explicit table (RFC 9113 5.1).

`TRANSITIONS` maps (state, event) to the next state, or to the error the event is in that state; whatever the
table does not list is a protocol error, raised in one place (`transition`). The RFC's states are refined by
what our side has sent (a reply started or not) and by how a stream closed, because the RFC treats late frames
differently after an END_STREAM, after a RST_STREAM received and after a RST_STREAM sent. Server push is never
used, so the reserved states do not occur. The connection keeps its own state (preface, settings, GOAWAY) apart.
"""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING, Any, Callable

from pytriton.frontend.h2.frames import (
    FLOW_CONTROL_ERROR,
    INTERNAL_ERROR,
    PROTOCOL_ERROR,
    STREAM_CLOSED,
    H2ConnectionError,
    H2StreamError,
)

if TYPE_CHECKING:
    from pytriton.frontend.h2.method import Context, Method

# States, ordered: from HALF_CLOSED_LOCAL on our side is done; from CLOSED on the stream is closed.
IDLE = 0
OPEN = 1  # request headers received, the request goes on, nothing sent yet
OPEN_REPLYING = 2  # ... our response headers are out
HALF_CLOSED_REMOTE = 3  # the request ended (END_STREAM received), nothing sent yet
HALF_CLOSED_REMOTE_REPLYING = 4
HALF_CLOSED_LOCAL = 5  # our END_STREAM is out, the request goes on
CLOSED = 6  # both ends closed with END_STREAM
CLOSED_RESET_BY_PEER = 7  # the client sent RST_STREAM
CLOSED_RESET_BY_US = 8  # we sent RST_STREAM
# A stream id at or below the highest one opened that we hold no record of: skipped (never opened, implicitly
# closed by RFC 9113 5.1.1) or closed so long ago that its record was dropped.
CLOSED_UNKNOWN = 9
STATE_NAMES = (
    "idle", "open", "open (replying)", "half-closed (remote)", "half-closed (remote, replying)",
    "half-closed (local)", "closed", "closed (reset by the client)", "closed (reset by us)", "closed",
)  # fmt: skip

# Events: frames received, frames sent.
RECV_HEADERS, RECV_DATA, RECV_END_STREAM, RECV_RST_STREAM, RECV_WINDOW_UPDATE, RECV_PRIORITY = range(6)
SEND_HEADERS, SEND_DATA, SEND_END_STREAM, SEND_RST_STREAM = range(6, 10)
EVENT_NAMES = (
    "HEADERS received", "DATA received", "END_STREAM received", "RST_STREAM received", "WINDOW_UPDATE received",
    "PRIORITY received", "HEADERS sent", "DATA sent", "END_STREAM sent", "RST_STREAM sent",
)  # fmt: skip


class _Error:
    """A table entry that is an error: a stream error (RST_STREAM) or a connection error (GOAWAY) with `code`."""

    __slots__ = ("connection", "code")

    def __init__(self, connection: bool, code: int):
        self.connection = connection
        self.code = code


_STREAM_CLOSED = _Error(False, STREAM_CLOSED)
_CONNECTION_STREAM_CLOSED = _Error(True, STREAM_CLOSED)
_CONNECTION_PROTOCOL = _Error(True, PROTOCOL_ERROR)

# (state, event) -> next state, or the _Error it is. Frames the RFC tells a receiver to ignore keep their state.
_TABLE: dict[tuple[int, int], int | _Error] = {
    (IDLE, RECV_HEADERS): OPEN,
    (IDLE, RECV_PRIORITY): IDLE,
}
for _open, _half in ((OPEN, HALF_CLOSED_REMOTE), (OPEN_REPLYING, HALF_CLOSED_REMOTE_REPLYING)):
    _TABLE.update({
        (_open, RECV_HEADERS): _open,  # trailers (their END_STREAM follows as its own event)
        (_open, RECV_DATA): _open,
        (_open, RECV_END_STREAM): _half,
        (_open, RECV_RST_STREAM): CLOSED_RESET_BY_PEER,
        (_open, RECV_WINDOW_UPDATE): _open,
        (_open, RECV_PRIORITY): _open,
        (_open, SEND_END_STREAM): HALF_CLOSED_LOCAL,
        (_open, SEND_RST_STREAM): CLOSED_RESET_BY_US,
        (_half, RECV_HEADERS): _STREAM_CLOSED,
        (_half, RECV_DATA): _STREAM_CLOSED,
        (_half, RECV_RST_STREAM): CLOSED_RESET_BY_PEER,
        (_half, RECV_WINDOW_UPDATE): _half,
        (_half, RECV_PRIORITY): _half,
        (_half, SEND_END_STREAM): CLOSED,
        (_half, SEND_RST_STREAM): CLOSED_RESET_BY_US,
    })  # fmt: skip
_TABLE.update({
    (OPEN, SEND_HEADERS): OPEN_REPLYING,
    (OPEN_REPLYING, SEND_DATA): OPEN_REPLYING,
    (HALF_CLOSED_REMOTE, SEND_HEADERS): HALF_CLOSED_REMOTE_REPLYING,
    (HALF_CLOSED_REMOTE_REPLYING, SEND_DATA): HALF_CLOSED_REMOTE_REPLYING,
    (HALF_CLOSED_LOCAL, RECV_HEADERS): HALF_CLOSED_LOCAL,
    (HALF_CLOSED_LOCAL, RECV_DATA): HALF_CLOSED_LOCAL,
    (HALF_CLOSED_LOCAL, RECV_END_STREAM): CLOSED,
    (HALF_CLOSED_LOCAL, RECV_RST_STREAM): CLOSED_RESET_BY_PEER,
    (HALF_CLOSED_LOCAL, RECV_WINDOW_UPDATE): HALF_CLOSED_LOCAL,
    (HALF_CLOSED_LOCAL, RECV_PRIORITY): HALF_CLOSED_LOCAL,
    (HALF_CLOSED_LOCAL, SEND_RST_STREAM): CLOSED_RESET_BY_US,
    # closed after END_STREAM both ways: more DATA is a stream error, more HEADERS a connection error (RFC 9113
    # 5.1 "closed"); WINDOW_UPDATE and RST_STREAM may cross our END_STREAM and are ignored
    (CLOSED, RECV_HEADERS): _CONNECTION_STREAM_CLOSED,
    (CLOSED, RECV_DATA): _STREAM_CLOSED,
    (CLOSED, RECV_RST_STREAM): CLOSED,
    (CLOSED, RECV_WINDOW_UPDATE): CLOSED,
    (CLOSED, RECV_PRIORITY): CLOSED,
    # after a RST_STREAM received: anything but PRIORITY is a stream error; a RST_STREAM is never answered with one,
    # and a WINDOW_UPDATE is ignored as on any closed stream
    (CLOSED_RESET_BY_PEER, RECV_HEADERS): _STREAM_CLOSED,
    (CLOSED_RESET_BY_PEER, RECV_DATA): _STREAM_CLOSED,
    (CLOSED_RESET_BY_PEER, RECV_RST_STREAM): CLOSED_RESET_BY_PEER,
    (CLOSED_RESET_BY_PEER, RECV_WINDOW_UPDATE): CLOSED_RESET_BY_PEER,
    (CLOSED_RESET_BY_PEER, RECV_PRIORITY): CLOSED_RESET_BY_PEER,
    # after a RST_STREAM sent: the client may have sent frames before it saw ours; all are ignored
    (CLOSED_RESET_BY_US, RECV_HEADERS): CLOSED_RESET_BY_US,
    (CLOSED_RESET_BY_US, RECV_DATA): CLOSED_RESET_BY_US,
    (CLOSED_RESET_BY_US, RECV_RST_STREAM): CLOSED_RESET_BY_US,
    (CLOSED_RESET_BY_US, RECV_WINDOW_UPDATE): CLOSED_RESET_BY_US,
    (CLOSED_RESET_BY_US, RECV_PRIORITY): CLOSED_RESET_BY_US,
    # a stream id below the highest one opened that we know nothing of: new HEADERS there break the ordering of
    # stream ids (RFC 9113 5.1.1); late DATA gets a stream error
    (CLOSED_UNKNOWN, RECV_HEADERS): _CONNECTION_PROTOCOL,
    (CLOSED_UNKNOWN, RECV_DATA): _STREAM_CLOSED,
    (CLOSED_UNKNOWN, RECV_RST_STREAM): CLOSED_UNKNOWN,
    (CLOSED_UNKNOWN, RECV_WINDOW_UPDATE): CLOSED_UNKNOWN,
    (CLOSED_UNKNOWN, RECV_PRIORITY): CLOSED_UNKNOWN,
})  # fmt: skip
TRANSITIONS: dict[int, int | _Error] = {state << 4 | event: entry for (state, event), entry in _TABLE.items()}


def transition(stream_id: int, state: int, event: int) -> int:
    """The state after `event` in `state` (a frame to be ignored leaves it as it is). An error in the table, or an
    event the table does not list, is raised here: H2StreamError or H2ConnectionError. (A sending event that is
    not listed is a bug of ours: INTERNAL_ERROR.)"""
    try:
        entry = TRANSITIONS[state << 4 | event]
    except KeyError:
        code = INTERNAL_ERROR if event >= SEND_HEADERS else PROTOCOL_ERROR
        raise H2ConnectionError(
            code, f"stream {stream_id}: {EVENT_NAMES[event]} in state {STATE_NAMES[state]}"
        ) from None
    if isinstance(entry, int):
        return entry
    message = f"stream {stream_id}: {EVENT_NAMES[event]} in state {STATE_NAMES[state]}"
    if entry.connection:
        raise H2ConnectionError(entry.code, message)
    raise H2StreamError(stream_id, entry.code, message)


def window_error(stream_id: int) -> H2StreamError | H2ConnectionError:
    message = "the flow-control window would exceed 2^31-1"
    return H2StreamError(stream_id, FLOW_CONTROL_ERROR, message) if stream_id else H2ConnectionError(
        FLOW_CONTROL_ERROR, message
    )


class ClosedStreams:
    """How the most recently closed streams closed (the RFC answers late frames by that), a bounded record."""

    __slots__ = ("_states", "_size")

    def __init__(self, size: int = 128):
        self._states: dict[int, int] = {}
        self._size = size

    def add(self, stream_id: int, state: int) -> None:
        states = self._states
        states[stream_id] = state
        if len(states) > self._size:
            del states[next(iter(states))]

    def state(self, stream_id: int, last_stream_id: int) -> int:
        """The state of a stream that is not open: idle above the highest stream id opened (and for ids the
        client may not use), else closed as recorded."""
        if stream_id > last_stream_id or not stream_id & 1:
            return IDLE
        return self._states.get(stream_id, CLOSED_UNKNOWN)

    def clear(self) -> None:
        self._states.clear()


class Stream:
    """An open stream: its state, the gRPC call on it, the request message being received, the reply waiting
    for flow-control windows."""

    __slots__ = (
        "id", "state", "method", "metadata", "encoding", "deadline", "timer", "task", "context",
        "head", "head_fill", "body", "fill", "expect", "compressed", "messages", "queue",
        "recv_window", "recv_unacked", "held", "content_length", "received",
        "send_window", "pending", "pending_size", "pending_messages", "trailers", "drained", "gzip_level", "gzip",
    )  # fmt: skip

    def __init__(self, stream_id: int, state: int, send_window: int, recv_window: int):
        self.id = stream_id
        self.state = state
        self.method: Method | None = None
        self.metadata: tuple[tuple[str, Any], ...] = ()
        self.encoding: str | None = None
        self.deadline: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.task: Any = None  # the call's asyncio.Task, or what answers a call without one (`_h2_call._Answering`)
        self.context: Context | None = None
        # receiving: the 5-byte message prefix, then the message body, which grows as its bytes arrive
        self.head = bytearray(5)
        self.head_fill = 0
        self.body: bytearray | memoryview | None = None  # (a memoryview: a receive segment, core/received.py)
        self.fill = 0
        self.expect = 0  # the body's declared length
        self.compressed = False
        self.messages: list[Any] = []  # complete messages of a unary call
        # complete messages of a client-streaming call with their sizes on the wire (None ends it)
        self.queue: asyncio.Queue[Any] | None = None
        self.recv_window = recv_window  # what the client may still send on this stream
        self.recv_unacked = 0  # received and not yet returned to the client (WINDOW_UPDATE)
        self.held = 0  # of those, the bytes of complete messages its handler has not taken yet (not to be returned)
        self.content_length: int | None = None  # a content-length header, checked against the DATA received
        self.received = 0
        # sending: response bytes waiting for a window, with each message's release (a callable) after its bytes
        self.send_window = send_window
        self.pending: collections.deque[memoryview | Callable[[], None]] = collections.deque()
        self.pending_size = 0
        self.pending_messages = 0
        self.trailers: bytes | None = None  # the call's end, queued or sent (the call is over once set)
        self.drained: asyncio.Future[Any] | None = None  # a streaming handler waiting for its backlog to drain
        self.gzip_level: int | None = None  # responses are gzip-compressed at this zlib level (grpc-encoding: gzip)
        self.gzip: tuple[list[Any], Callable[[], None] | None] | None = None  # a response waiting for compression

    @property
    def receiving(self) -> bool:
        return self.state == OPEN or self.state == OPEN_REPLYING or self.state == HALF_CLOSED_LOCAL

    @property
    def replying(self) -> bool:
        """Our response headers are out and our END_STREAM is not."""
        return self.state == OPEN_REPLYING or self.state == HALF_CLOSED_REMOTE_REPLYING

    @property
    def reset(self) -> bool:
        return self.state == CLOSED_RESET_BY_PEER or self.state == CLOSED_RESET_BY_US
