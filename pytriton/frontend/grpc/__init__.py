"""gRPC front-end (Triton's GRPCInferenceService) over this package's own HTTP/2 transport, or grpcio.

The names below load on first use: a process that needs only the limits (`_h2_limits`, e.g. the user's process
behind `Triton.bind`, which builds the server's configuration) does not import the server, grpcio and tritonclient.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytriton.utils.lazy import lazy_names

if TYPE_CHECKING:
    from pytriton.config.h2 import H2Limits
    from pytriton.frontend.grpc.server import GrpcFrontend

_WHERE = {"GrpcFrontend": "pytriton.frontend.grpc.server", "H2Limits": "pytriton.config.h2"}

__getattr__ = lazy_names(__name__, _WHERE)

__all__ = ["GrpcFrontend", "H2Limits"]
