"""What an error of a tritonclient call means, and the PyTritonClient exception it becomes."""

from __future__ import annotations

import contextlib

from tritonclient.utils import InferenceServerException

from pytriton.client.exceptions import (
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
)


def error_message(exc: BaseException) -> str:
    """The server's message in `exc` (tritonclient or grpc error), else its text or type name."""
    if isinstance(exc, InferenceServerException):
        return exc.message() or str(exc)
    details = getattr(exc, "details", None)  # grpc.RpcError (e.g. grpc.aio.AioRpcError)
    if callable(details):
        with contextlib.suppress(Exception):
            return details() or str(exc)
    return str(exc) or type(exc).__name__


def is_restricted_error(exc: BaseException) -> bool:
    """The server refused the call for a missing or wrong access token."""
    message = error_message(exc)
    return "is restricted, expecting header" in message


def is_unimplemented_error(exc: BaseException) -> bool:
    """The server does not implement the called endpoint."""
    text = error_message(exc).lower()
    status = exc.status() if isinstance(exc, InferenceServerException) else ""
    return "UNIMPLEMENTED" in (status or "") or "not implemented" in text


def is_deadline_error(exc: BaseException) -> bool:
    """The call ran past its gRPC deadline."""
    if isinstance(exc, InferenceServerException):
        status = exc.status() or ""
        if "DEADLINE_EXCEEDED" in status:
            return True
        return "Deadline Exceeded" in (exc.message() or "")
    code = getattr(exc, "code", None)  # grpc.RpcError
    if callable(code):
        try:
            return "DEADLINE_EXCEEDED" in str(code())
        except Exception:  # noqa: BLE001
            return False
    return False


def is_unknown_model_error(exc: BaseException) -> bool:
    """The server does not know the model (or the version) asked for."""
    message = error_message(exc).lower()
    return "unknown model" in message


def convert_server_error(exc: BaseException, action: str) -> PyTritonClientError:
    """Map an error of a tritonclient call to the PyTritonClient exception it means."""
    if isinstance(exc, PyTritonClientError):
        return exc
    message = error_message(exc)
    if is_deadline_error(exc) or isinstance(exc, TimeoutError):
        return PyTritonClientTimeoutError(f"Timeout occurred during {action}: {message}")
    if is_unknown_model_error(exc):
        return PyTritonClientModelUnavailableError(f"Model is unavailable: {message}")
    return PyTritonClientInferenceServerError(f"Error occurred during {action}. Message: {message}")
