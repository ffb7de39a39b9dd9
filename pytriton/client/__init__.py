"""Clients for models served over Triton's HTTP and gRPC protocols (PyTriton 0.7 compatible)."""

from pytriton.client.client import (
    AsyncioDecoupledModelClient,
    AsyncioModelClient,
    DecoupledModelClient,
    FuturesModelClient,
    ModelClient,
)

__all__ = [
    "AsyncioDecoupledModelClient",
    "AsyncioModelClient",
    "DecoupledModelClient",
    "FuturesModelClient",
    "ModelClient",
]
