"""Exceptions of pytriton and the Triton status each one maps to.

`ServerError` carries a `Status`; the front-ends map a status to a gRPC code or an HTTP code in one
place each, so the core never knows about either protocol.
"""

from __future__ import annotations

import enum


class Status(enum.Enum):
    """Triton's error kinds (TRITONSERVER_Error_Code)."""

    UNKNOWN = "UNKNOWN"
    INTERNAL = "INTERNAL"
    NOT_FOUND = "NOT_FOUND"
    INVALID_ARG = "INVALID_ARG"
    UNAVAILABLE = "UNAVAILABLE"
    UNSUPPORTED = "UNSUPPORTED"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    CANCELLED = "CANCELLED"


class PyTritonError(Exception):
    """Base of every error raised by pytriton."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class PyTritonValidationError(PyTritonError):
    """A configuration or an argument given to pytriton is not valid."""


class PyTritonInvalidOperationError(PyTritonError):
    """The operation is not allowed in the current state."""


class PyTritonBadParameterError(PyTritonError):
    """A parameter given to pytriton has a wrong value."""


class PyTritonModelConfigError(PyTritonError):
    """A model configuration is not valid."""


class PyTritonUnrecoverableError(PyTritonError):
    """An error the server cannot recover from."""


class PyTritonRuntimeError(PyTritonError):
    """An error while pytriton runs (e.g. the server process died)."""


class ServerError(PyTritonError):
    """An error answered to a client, with the Triton status it maps to."""

    # Why the request failed, as Triton's statistics tell failures apart (nv_inference_request_failure's `reason`):
    # REJECTED (by the scheduler's queue), CANCELED, BACKEND (its execution failed) or OTHER.
    failure_reason = "OTHER"

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status

    def __repr__(self) -> str:
        return f"ServerError({self.status.value}, {self.message!r})"


def invalid_arg(message: str) -> ServerError:
    return ServerError(Status.INVALID_ARG, message)


def not_found(message: str) -> ServerError:
    return ServerError(Status.NOT_FOUND, message)


def internal(message: str) -> ServerError:
    return ServerError(Status.INTERNAL, message)


def unavailable(message: str) -> ServerError:
    return ServerError(Status.UNAVAILABLE, message)


def unsupported(message: str) -> ServerError:
    return ServerError(Status.UNSUPPORTED, message)
