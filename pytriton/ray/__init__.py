"""pytriton on Ray Serve: a deployment whose replicas each host an in-process pytriton server.

    from ray import serve
    import pytriton.ray

    serve.run(pytriton.ray.from_repository("/models", num_replicas=2))

Serve's HTTP proxy then speaks Triton's HTTP API (tritonclient.http, ModelClient), its gRPC proxy Triton's gRPC
service (`serve.start(grpc_options=pytriton.ray.grpc_options())`), and other deployments call
`handle.infer.remote({"x": array})`. See docs/guide/ray-serve.md.

Importing `pytriton.ray` imports Ray (`pip install pytriton[ray]`); importing `pytriton` does not.
"""

from __future__ import annotations

from pytriton.ray import _protos  # noqa: F401 - Triton's gRPC messages picklable by name (the proxy imports us)
from pytriton.ray._app import (
    GRPC_SERVICER_FUNCTION,
    add_servicer_to_server,
    from_callable,
    from_repository,
    grpc_options,
    triton_app,
)
from pytriton.ray._host import CallableModel
from pytriton.ray._serve import ReplicaUnavailable, TritonIngress, TritonReplica

__all__ = [
    "GRPC_SERVICER_FUNCTION", "CallableModel", "ReplicaUnavailable", "TritonIngress", "TritonReplica",
    "add_servicer_to_server", "from_callable", "from_repository", "grpc_options", "triton_app",
]
