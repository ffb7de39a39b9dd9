"""Opening a listening TCP socket for a front-end on the event loop (HTTP, metrics and gRPC share this)."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Callable

logger = logging.getLogger("pytriton.frontend")


async def listen(
    protocol_factory: Callable[[], asyncio.BaseProtocol], address: str, port: int, protocol: str, service: str,
    reuse_port: bool = False,
) -> tuple[asyncio.base_events.Server, int]:
    """Listen on `address:port` (port 0: any free one; an IPv6 address may come in brackets); return the server and
    its port. `protocol` names what failed in the error ("cannot listen for gRPC on ..."), `service` what started in
    the log line; `reuse_port` sets SO_REUSEPORT (several listeners on one port share its connections)."""
    loop = asyncio.get_running_loop()
    try:
        server = await loop.create_server(
            protocol_factory, address.strip("[]") or None, port, reuse_address=True, backlog=1024,
            reuse_port=reuse_port or None,
        )
    except OSError as exc:
        raise OSError(f"cannot listen for {protocol} on {address}:{port}: {exc}") from exc
    for sock in server.sockets:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    bound = server.sockets[0].getsockname()[1]
    logger.info("Started %s at %s:%d", service, address, bound)
    return server, bound
