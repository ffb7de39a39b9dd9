"""The server's core: models, validation, scheduling entry point and statistics; no wire protocol."""

from pytriton.core.server_core import SERVER_NAME, SERVER_VERSION, ServerCore
from pytriton.core.types import InferRequest, InferResponse, RequestedOutput

__all__ = ["ServerCore", "SERVER_NAME", "SERVER_VERSION", "InferRequest", "InferResponse", "RequestedOutput"]
