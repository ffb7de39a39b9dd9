"""The HTTP/1.1 server that the HTTP (Triton REST) and metrics front-ends both use: requests and responses,
the plain JSON error answer, the listening port, and its limits."""

from pytriton.frontend.http1.limits import HttpLimits
from pytriton.frontend.http1.listener import HttpListener
from pytriton.frontend.http1.messages import Handler, HttpRequest, HttpResponse, error_response

__all__ = ["Handler", "HttpLimits", "HttpListener", "HttpRequest", "HttpResponse", "error_response"]
