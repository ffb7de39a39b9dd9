"""The HTTP/1.1 server that the HTTP (Triton REST) and metrics front-ends both use: requests and responses,
the plain JSON error answer, the listening port, and its limits.

The names below load on first use: a process that needs only the limits (`limits`) does not import the server."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytriton.utils.lazy import lazy_names

if TYPE_CHECKING:
    from pytriton.config.http1 import HttpLimits
    from pytriton.frontend.http1.listener import HttpListener
    from pytriton.frontend.http1.messages import Handler, HttpRequest, HttpResponse, error_response

_WHERE = {
    "HttpLimits": "pytriton.config.http1",
    "HttpListener": "pytriton.frontend.http1.listener",
    "Handler": "pytriton.frontend.http1.messages",
    "HttpRequest": "pytriton.frontend.http1.messages",
    "HttpResponse": "pytriton.frontend.http1.messages",
    "error_response": "pytriton.frontend.http1.messages",
}

__getattr__ = lazy_names(__name__, _WHERE)

__all__ = ["Handler", "HttpLimits", "HttpListener", "HttpRequest", "HttpResponse", "error_response"]
