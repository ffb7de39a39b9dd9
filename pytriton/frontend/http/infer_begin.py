"""Triton's HTTP infer route answered from a callback (`begin_infer`), and what it shares with `HttpApp`'s coroutine
route: the status codes of errors, the `Inference-Header-Content-Length` parse, the answer's headers.

`begin_infer` takes a `POST /v2/models/<name>[/versions/<version>]/infer` request, checks, parses and submits it
at once (`ServerCore.begin_infer`: no asyncio task, no coroutine chain per request) and returns an `InferAnswer`
whose future is done when its job is; the connection then asks it for the answer (`HttpConnection`). What it
does not take (None: `HttpApp.handle` runs it, with the same checks in the same order): tracing on, a body or an
answer to be compressed, an unknown model, one with a response cache or ensemble steps, any other route.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import unquote

from pytriton.core.calls import UnaryCall
from pytriton.core.received import drop_frames
from pytriton.core.types import RequestedOutput
from pytriton.exceptions import ServerError, Status, invalid_arg, unsupported
from pytriton.frontend.access import AccessDenied
from pytriton.frontend.header_forwarding import forward_headers
from pytriton.frontend.http.infer import encode_infer_response, raw_input_of
from pytriton.frontend.http1 import HttpRequest, HttpResponse, error_response

if TYPE_CHECKING:
    from pytriton.frontend.http.app import HttpApp

STATUS_TO_HTTP = {
    Status.UNKNOWN: 400,
    Status.INTERNAL: 500,
    Status.NOT_FOUND: 404,
    Status.INVALID_ARG: 400,
    Status.UNAVAILABLE: 503,
    Status.UNSUPPORTED: 501,
    Status.ALREADY_EXISTS: 400,
    Status.CANCELLED: 400,
}

_STOI = re.compile(r"\s*([+-]?\d+)")


def error_answer(exc: ServerError) -> HttpResponse:
    """A ServerError as Triton's HTTP answer (the request's buffers, which its traceback may hold, free at once)."""
    drop_frames(exc)
    return error_response(STATUS_TO_HTTP.get(exc.status, 400), exc.message)


def accepted_encoding(header: str | None) -> str | None:
    """The best of gzip/deflate the client accepts (q-values honoured), or None for identity."""
    if not header:
        return None
    best, best_q = None, 0.0
    for item in header.split(","):
        name, _, params = item.strip().partition(";")
        name = name.strip().lower()
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if name in ("gzip", "deflate") and q > best_q:
            best, best_q = name, q
    return best


def header_length(text: str) -> int:
    """`Inference-Header-Content-Length` parsed as Triton does (std::stoi: leading integer, int32 range)."""
    name = "Inference-Header-Content-Length"
    match = _STOI.match(text)
    if match is None:
        raise invalid_arg(f"Unable to parse {name}, got: {text}")
    value = int(match.group(1))
    if not -(2**31) <= value < 2**31:
        raise invalid_arg(
            f"Unable to parse {name}, value is out of range [ {-(2**31)}, {2**31 - 1} ], got: {text}"
        )
    return value


def infer_headers(json_length: int | None) -> list[tuple[str, str]]:
    """The headers of an infer answer whose body is JSON only (None) or a JSON header of `json_length` and binary."""
    if json_length is None:
        return [("Content-Type", "application/json")]
    return [("Content-Type", "application/octet-stream"), ("Inference-Header-Content-Length", str(json_length))]


class InferAnswer:
    """A request `begin_infer` submitted: once `future` is done, `answer()` is its HTTP answer (an error too);
    `cancel()`: the connection ended first, the job is withdrawn."""

    __slots__ = ("_call", "_outputs", "_binary_default", "future", "watch")

    def __init__(self, call: UnaryCall, outputs: list[RequestedOutput], binary_default: bool):
        self._call = call
        self._outputs = outputs
        self._binary_default = binary_default
        self.future = call.future
        self.watch = call.watch  # (the job calls back in the loop pass its result arrives in: `Job.watch`)

    def answer(self) -> HttpResponse:
        try:
            response = self._call.result()
        except ServerError as exc:
            return error_answer(exc)
        try:
            parts, json_length = encode_infer_response(response, self._outputs, self._binary_default)
        except BaseException as exc:
            response.release()
            if isinstance(exc, ServerError):
                return error_answer(exc)
            raise
        return HttpResponse(200, parts, infer_headers(json_length), on_sent=response.release)

    def cancel(self) -> None:
        self._call.cancel()


def _route(path: str) -> tuple[str, str] | None:
    """(model, version) of `/v2/models/<model>[/versions/<version>]/infer` (parts unquoted as `HttpApp._route` does),
    else None."""
    parts = path.split("/")
    if "%" in path:
        parts = [unquote(p) for p in parts]
    count = len(parts)
    if count == 5:
        version = ""
    elif count == 7 and parts[4] == "versions" and parts[5].isdigit():
        version = parts[5]
    else:
        return None
    if parts[1] != "v2" or parts[2] != "models" or parts[-1] != "infer" or not parts[3] or parts[0]:
        return None
    return parts[3], version


def begin_infer(app: HttpApp, request: HttpRequest) -> HttpResponse | InferAnswer | None:
    """See the module's docstring: an `InferAnswer`, an error answer, or None where `app.handle` runs the request."""
    if request.method != "POST" or app.tracer.active:
        return None
    route = _route(request.path)
    if route is None:
        return None
    headers = request.headers
    if headers.get("content-encoding", "identity") != "identity":
        return None  # (`HttpApp._infer` inflates it)
    accept = headers.get("accept-encoding")  # (http.client sends "identity")
    if accept is not None and accepted_encoding(accept) is not None:
        return None  # (`HttpApp._infer` compresses the answer)
    name, version = route
    core = app.core
    try:
        model = core.registry.get(name, version)
    except ServerError:
        return None  # (answered by `handle`, in its order)
    if model.cache is not None or model.ensemble is not None:
        return None
    try:
        # `HttpApp._models`, `_infer` and `run_infer`, in their order
        if app.access.restricts("inference"):  # (most servers restrict nothing: no check to build)
            app.check("inference", request)
        body = request.body
        length_text = headers.get("inference-header-content-length")
        json_length = None if length_text is None else header_length(length_text)
        raw = raw_input_of(model.config, len(body)) if json_length == 0 else None
        infer_request, binary_default = app.header_cache.parse(name, version, body, json_length, raw)
        if infer_request.layout is None and (
            any(t.data is None for t in infer_request.inputs)
            or any("shared_memory_region" in o.parameters for o in infer_request.outputs)
        ):
            app.check("shared-memory", request)
        if app.forward is not None:
            forward_headers(app.forward, headers.items(), infer_request.parameters)
        if model.config.decoupled:
            raise unsupported("HTTP end point doesn't support models with decoupled transaction policy")
        return InferAnswer(core.begin_infer(infer_request, model), infer_request.outputs, binary_default)
    except ServerError as exc:
        return error_answer(exc)
    except AccessDenied as exc:
        return error_response(403, str(exc))


__all__ = ["STATUS_TO_HTTP", "InferAnswer", "accepted_encoding", "begin_infer", "error_answer", "header_length",
           "infer_headers"]
