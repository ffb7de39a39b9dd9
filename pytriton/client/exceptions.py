"""Exceptions raised by the pytriton clients (`pytriton.client`)."""

from __future__ import annotations


class PyTritonClientError(Exception):
    """Base of every error raised by the pytriton clients; `message` holds the text."""

    def __init__(self, message: str):
        super().__init__(message)
        self._message = message

    def __str__(self) -> str:
        return self._message

    @property
    def message(self) -> str:
        """The error message."""
        return self._message


class PyTritonClientValueError(PyTritonClientError):
    """An argument given to the client is not valid."""


class PyTritonClientInvalidUrlError(PyTritonClientValueError):
    """The server url could not be parsed or names an unsupported scheme."""


class PyTritonClientTimeoutError(PyTritonClientError):
    """Waiting for the server, the model or an inference took longer than allowed."""


class PyTritonClientModelUnavailableError(PyTritonClientError):
    """The model (or the requested version of it) is not available on the server."""


class PyTritonClientClosedError(PyTritonClientError):
    """The client was used after it had been closed."""


class PyTritonClientModelDoesntSupportBatchingError(PyTritonClientError):
    """`infer_batch` was called for a model whose max_batch_size is 0."""


class PyTritonClientInferenceServerError(PyTritonClientError):
    """The server (or the inference callable behind it) reported an error."""


class PyTritonClientQueueFullError(PyTritonClientError):
    """A non-blocking `FuturesModelClient` could not queue a request because its queue is full."""
