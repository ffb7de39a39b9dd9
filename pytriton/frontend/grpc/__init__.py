"""gRPC front-end (Triton's GRPCInferenceService)."""

from pytriton.frontend.grpc.server import GrpcFrontend

__all__ = ["GrpcFrontend"]
