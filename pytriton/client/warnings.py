"""Warnings issued by the pytriton clients."""

from __future__ import annotations


class PyTritonWarning(UserWarning):
    """Base of the warnings issued by pytriton."""


class NotSupportedTimeoutWarning(PyTritonWarning):
    """A timeout was requested for an operation that cannot honour it."""
