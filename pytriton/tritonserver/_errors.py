"""The exceptions of the in-process `tritonserver` API, one per Triton error code.

Triton raises ``TritonError`` subclasses from its C API's ``TRITONSERVER_Error_Code``; pytriton's
core raises ``ServerError`` with a ``Status`` of the same names. ``from_status`` is the one place
that maps one onto the other.
"""

from __future__ import annotations

from pytriton.exceptions import ServerError, Status


class TritonError(Exception):
    """Base of every error the in-process API raises; ``str(error)`` is Triton's message."""

    status: Status = Status.UNKNOWN


class UnknownError(TritonError):
    status = Status.UNKNOWN


class InternalError(TritonError):
    status = Status.INTERNAL


class NotFoundError(TritonError):
    status = Status.NOT_FOUND


class InvalidArgumentError(TritonError):
    status = Status.INVALID_ARG


class UnavailableError(TritonError):
    status = Status.UNAVAILABLE


class UnsupportedError(TritonError):
    status = Status.UNSUPPORTED


class AlreadyExistsError(TritonError):
    status = Status.ALREADY_EXISTS


class CancelledError(TritonError):
    status = Status.CANCELLED


_BY_STATUS: dict[Status, type[TritonError]] = {
    cls.status: cls
    for cls in (
        UnknownError,
        InternalError,
        NotFoundError,
        InvalidArgumentError,
        UnavailableError,
        UnsupportedError,
        AlreadyExistsError,
        CancelledError,
    )
}


def from_status(status: Status, message: str) -> TritonError:
    """The `TritonError` subclass for a pytriton status, carrying ``message``."""
    return _BY_STATUS.get(status, UnknownError)(message)


def from_server_error(error: ServerError) -> TritonError:
    """Convert an error the core raised into the in-process API's exception (chain it with ``from``)."""
    return from_status(error.status, error.message)
