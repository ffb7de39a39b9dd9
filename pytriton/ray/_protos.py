"""Triton's gRPC messages made picklable: tritonclient's generated `service_pb2` registers its message classes under
the module name `grpc_service_pb2` (the name of its .proto file), which no file provides. Ray Serve's gRPC proxy
pickles each request message to hand it to a replica, and pickle finds a class by its module's name, so both the
proxy and the replicas need that name to lead to the real module: `register()` makes it an alias of
`tritonclient.grpc.service_pb2` in `sys.modules` (it is called when `pytriton.ray` is imported)."""

from __future__ import annotations

import sys

from tritonclient.grpc import service_pb2

ALIAS = "grpc_service_pb2"


def register() -> None:
    """Make `grpc_service_pb2` importable (idempotent; a module of that name already there is left alone)."""
    sys.modules.setdefault(ALIAS, service_pb2)


register()

__all__ = ["ALIAS", "register", "service_pb2"]
