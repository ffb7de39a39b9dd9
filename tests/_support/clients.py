"""`tritonclient` per protocol, for tests parametrised by protocol ("grpc", "http")."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

CLIENTS: dict[str, ModuleType] = {"grpc": grpcclient, "http": httpclient}
PROTOCOLS = ["grpc", "http"]


def url_for(server: Any, protocol: str) -> str:
    """The server's address for `protocol` (host:port, as tritonclient takes it)."""
    return server.grpc_url if protocol == "grpc" else server.http_url


def client_for(server: Any, protocol: str, **kwargs: Any) -> Any:
    """A `tritonclient` InferenceServerClient for `protocol` on `server`; `kwargs` go to its constructor."""
    return CLIENTS[protocol].InferenceServerClient(url_for(server, protocol), **kwargs)
