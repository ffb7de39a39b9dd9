"""gRPC front-end (Triton's GRPCInferenceService) over this package's own HTTP/2 transport, or grpcio."""

from pytriton.frontend.grpc._h2_limits import H2Limits
from pytriton.frontend.grpc.server import GrpcFrontend

__all__ = ["GrpcFrontend", "H2Limits"]
