"""Multipart ZMQ messages in and out with few Python steps: every hop of every request goes through here.

pyzmq's `send_multipart`/`recv_multipart`/`poll` wrap each frame in Python-level checks and combine their flags as
`enum.IntFlag`s (an enum operation costs about a microsecond); `poll(0)` builds a `Poller` each time. These call
the Cython socket's `send`/`recv`/`get` with plain int flags instead, and read a received frame's own `more` flag
instead of asking the socket (getsockopt) after each frame (same semantics: `copy=False` still copies
frames under the socket's copy threshold; errors are the same `zmq.ZMQError`s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import zmq
from zmq.backend import Socket as _BackendSocket

SNDMORE = int(zmq.SNDMORE)
NOBLOCK = int(zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)

_send = _BackendSocket.send
_recv = _BackendSocket.recv
_get = _BackendSocket.get


def send_frames(socket: zmq.Socket[bytes], frames: Sequence[Any], flags: int = 0) -> None:
    """Send `frames` as one multipart message (without copying frames over the socket's copy threshold)."""
    last = len(frames) - 1
    for index, frame in enumerate(frames):
        _send(socket, frame, flags | SNDMORE if index < last else flags, False)


def recv_frames(socket: zmq.Socket[bytes], flags: int = 0) -> list[zmq.Frame]:
    """Receive one multipart message as Frames (zmq.Again with NOBLOCK when none waits)."""
    frame = _recv(socket, flags, False)
    frames = [frame]
    while frame.more:  # (the Frame's own flag: no getsockopt(RCVMORE) per frame)
        frame = _recv(socket, flags, False)
        frames.append(frame)
    return frames


def readable(socket: zmq.Socket[bytes]) -> bool:
    """Whether a message waits (ZMQ_EVENTS; like `poll(0, POLLIN)`, it also takes the socket's pending commands)."""
    events: Any = _get(socket, _EVENTS)
    return bool(events & _POLLIN)
