"""What the kernel knows of a test's TCP connection, to wait on a socket's state rather than for a guessed time: the
state of the server's end, the bytes a socket holds unsent or unread, the connections this machine holds to a
port."""

from __future__ import annotations

import fcntl
import socket
import struct
import termios
from typing import Iterator

LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}
"""127.0.0.1 as /proc/net/tcp writes it, and as an IPv4-mapped address in /proc/net/tcp6."""
ESTABLISHED = 1
"""TCP_ESTABLISHED (linux/tcp_states.h), the state of an open connection; any other means it is closing or closed."""


def unsent_bytes(sock: socket.socket) -> int:
    """Bytes written to `sock` that the peer has not acknowledged yet (SIOCOUTQ)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]


def unread_bytes(sock: socket.socket) -> int:
    """Bytes received on `sock` that the test has not read yet (SIOCINQ)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0]


def _rows() -> Iterator[tuple[int, int, int, int]]:
    """(local port, remote port, TCP state, bytes received and not read yet) of every loopback IPv4 connection
    (IPv4-mapped ones too) on this machine, from /proc/net/tcp and /proc/net/tcp6."""
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(path) as table:
            next(table)
            for line in table:
                fields = line.split()
                local, remote = fields[1].split(":"), fields[2].split(":")
                if remote[0] in LOOPBACK:
                    unread = int(fields[4].split(":")[1], 16)
                    yield int(local[1], 16), int(remote[1], 16), int(fields[3], 16), unread


def _connections() -> Iterator[tuple[int, int, int]]:
    """(local port, remote port, TCP state) of every loopback connection (see `_rows`)."""
    for local, remote, state, _unread in _rows():
        yield local, remote, state


def peer_unread(sock: socket.socket) -> int | None:
    """Bytes `sock` sent that the other end (the server) has received but not read yet (None once that end is
    gone): 0 once the server read all of it."""
    ours, theirs = sock.getsockname()[1], sock.getpeername()[1]
    return next((unread for local, remote, _state, unread in _rows() if (local, remote) == (theirs, ours)), None)


def peer_state(sock: socket.socket) -> int | None:
    """The TCP state of the other end of `sock`, a loopback connection (None once that end is gone): the server's
    side shows its close at once (FIN_WAIT1), even while data it wrote still waits for `sock` to read it and its FIN
    waits behind that data."""
    try:
        ours, theirs = sock.getsockname()[1], sock.getpeername()[1]
    except OSError:  # (ENOTCONN: reset, the connection is gone)
        return None
    return next((state for local, remote, state in _connections() if (local, remote) == (theirs, ours)), None)


def established_to(port: int) -> set[int]:
    """The local ports of the connections to 127.0.0.1:`port` in state ESTABLISHED (from /proc/net/tcp, and
    /proc/net/tcp6 for IPv4-mapped sockets, which grpcio uses): a client's connections, when a library keeps its
    socket to itself."""
    return {local for local, remote, state in _connections() if remote == port and state == ESTABLISHED}


CLOSE_WAIT = 8
"""TCP_CLOSE_WAIT: the client closed its end; the server's end stays here until the server closes it too."""


def server_closed(server_port: int, client_port: int) -> bool:
    """Whether the server has closed its end of the loopback connection from `client_port` (it heard the client go:
    its end is neither open nor waiting in CLOSE_WAIT for the server to act)."""
    return all(state not in (ESTABLISHED, CLOSE_WAIT)
               for local, remote, state in _connections() if (local, remote) == (server_port, client_port))
