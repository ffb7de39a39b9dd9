"""The HTTP front-end: Triton's REST API served by `HttpProtocol` in the server's event loop."""

from __future__ import annotations

import asyncio
import logging

from pytriton.frontend._listen import listen
from pytriton.frontend.http.app import HttpApp, error_response
from pytriton.frontend.http.protocol import HttpProtocol

logger = logging.getLogger("pytriton.frontend")


class HttpFrontend:
    """Listens on one address and answers with `HttpApp` (or any handler with the same shape)."""

    def __init__(self, app: HttpApp, address: str, port: int, name: str = "HTTPService", max_body_bytes: int | None = None):
        self.app = app
        self.address = address
        self.requested_port = port
        self.name = name
        self.max_body_bytes = max_body_bytes or getattr(app, "max_input_bytes", 64 * 1024 * 1024)
        self.port: int | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[HttpProtocol] = set()

    def _protocol(self) -> HttpProtocol:
        protocol = HttpProtocol(
            self.app.handle, self.max_body_bytes, on_error=error_response,
            too_large_hint=getattr(self.app, "too_large_hint", ""),
        )
        protocol.connections = self._connections
        return protocol

    async def start(self) -> int:
        self._server, self.port = await listen(self._protocol, self.address, self.requested_port, "HTTP", self.name)
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for connection in list(self._connections):
                if connection.transport is not None:
                    connection.transport.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except asyncio.TimeoutError:
                pass
            self._server = None
