"""What the kernel knows of a test's TCP socket, to wait on a socket's state rather than for a guessed time: its
TCP state, the bytes it holds unsent or unread, and the connections this machine holds to a port."""

from __future__ import annotations

import fcntl
import socket
import struct
import termios

ESTABLISHED = 1
"""TCP_ESTABLISHED (linux/tcp_states.h): `tcp_state` of an open connection; any other state means it is closing or
closed (the peer's FIN makes it CLOSE_WAIT, its reset CLOSE)."""


def tcp_state(sock: socket.socket) -> int:
    """The connection's TCP state (tcpi_state, the first byte of TCP_INFO)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]


def unsent_bytes(sock: socket.socket) -> int:
    """Bytes written to `sock` that the peer has not acknowledged yet (SIOCOUTQ)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]


def unread_bytes(sock: socket.socket) -> int:
    """Bytes received on `sock` that the test has not read yet (SIOCINQ)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0]


def established_to(port: int) -> set[int]:
    """The local ports of the connections to 127.0.0.1:`port` in state ESTABLISHED (from /proc/net/tcp, and
    /proc/net/tcp6 for IPv4-mapped sockets, which grpcio uses): a client's connections, when a library keeps its
    socket to itself."""
    remotes = {f"0100007F:{port:04X}", f"0000000000000000FFFF00000100007F:{port:04X}"}
    found = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(path) as table:
            next(table)
            for line in table:
                fields = line.split()
                local, remote, state = fields[1], fields[2], int(fields[3], 16)
                if state == ESTABLISHED and remote in remotes:
                    found.add(int(local.split(":")[1], 16))
    return found
