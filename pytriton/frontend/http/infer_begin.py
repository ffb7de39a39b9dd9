"""The one way an HTTP inference begins, for every HTTP infer route (KServe's `/v2/models/<m>[/versions/<v>]/infer`,
SageMaker's and Vertex AI's predict routes): `begin_infer` parses, admits and begins the request in the core at once
(`ServerCore.begin`: no asyncio task, no coroutine chain per request) and returns an `InferAnswer` whose future is
done when its call is. The HTTP/1.1 connection answers it from that future's callback (`HttpConnection`); a route
run as a coroutine awaits it (`answered`). Also the status codes of errors, the `Inference-Header-Content-Length`
parse and the answer's headers.
"""

from __future__ import annotations

import asyncio
import gzip
import re
import zlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pytriton.core.calls import Call
from pytriton.core.received import drop_frames
from pytriton.core.trace import HTTP_RECV_END, HTTP_SEND_END, HTTP_SEND_START, Trace, Tracer, finish_on_sent
from pytriton.core.types import RequestedOutput
from pytriton.exceptions import ServerError, Status, invalid_arg
from pytriton.frontend.http.infer import encode_infer_response, parse_infer_request, raw_input_of
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


class HttpClient:
    """How admission reads an HTTP request's client."""

    @staticmethod
    def headers(request: HttpRequest) -> dict[str, str]:
        return request.headers

    @staticmethod
    def peer(request: HttpRequest) -> str | None:
        return request.peer

    @staticmethod
    def forwarded(request: HttpRequest) -> Iterable[tuple[str, str]]:
        return request.headers.items()


AnswerHeaders = Callable[[int | None], list[tuple[str, str]]]


class InferAnswer:
    """A request `begin_infer` began: once `future` is done, `answer()` is its HTTP answer, a ServerError the call (or
    encoding its response) ended with answered by `on_error` (Triton's statuses; None: raised); `cancel()`: the client
    left first, the call is withdrawn. The answer's body is compressed with `encoding` (gzip or deflate) where given,
    and its headers are `headers(json_length)`; a traced request gets the HTTP front-end's send timestamps and its
    trace ends with the answer."""

    __slots__ = ("_call", "_outputs", "_binary_default", "_headers", "_encoding", "_trace", "_tracer", "_on_error",
                 "future", "watch")

    def __init__(self, call: Call, outputs: list[RequestedOutput], binary_default: bool,
                 headers: AnswerHeaders = infer_headers, encoding: str | None = None, trace: Trace | None = None,
                 tracer: Tracer | None = None,
                 on_error: Callable[[ServerError], HttpResponse] | None = error_answer):  # fmt: skip
        self._call = call
        self._outputs = outputs
        self._binary_default = binary_default
        self._headers = headers
        self._encoding = encoding
        self._trace = trace
        self._tracer = tracer
        self._on_error = on_error
        self.future = call.future
        self.watch = call.watch  # (the job calls back in the loop pass its result arrives in: `Job.watch`)

    def answer(self) -> HttpResponse:
        """The answer once `future` is done."""
        trace = self._trace
        try:
            response = self._call.result()
            if trace is not None:
                trace.stamp(HTTP_SEND_START)
            try:
                parts, json_length = encode_infer_response(response, self._outputs, self._binary_default)
            except BaseException:
                response.release()
                raise
        except BaseException as exc:
            if trace is not None:
                self._finish_trace()
            if self._on_error is not None and isinstance(exc, ServerError):
                return self._on_error(exc)
            raise
        headers = self._headers(json_length)
        encoding = self._encoding
        if encoding is not None:
            data = b"".join(bytes(p) if isinstance(p, memoryview) else p for p in parts)
            response.release()
            headers.append(("Content-Encoding", encoding))
            answer = HttpResponse(200, [compress(data, encoding)], headers)
        else:
            answer = HttpResponse(200, parts, headers, on_sent=response.release)
        if trace is not None:
            assert self._tracer is not None
            answer.on_sent = finish_on_sent(self._tracer, trace, HTTP_SEND_END, answer.on_sent)
        return answer

    def cancel(self) -> None:
        self._call.cancel()
        if self._trace is not None:
            self._finish_trace()

    def _finish_trace(self) -> None:
        assert self._tracer is not None and self._trace is not None
        self._tracer.finish(self._trace)


def compress(data: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(data, compresslevel=6)
    return zlib.compress(data)


def begin_infer(app: HttpApp, request: HttpRequest, name: str, version: str, body: Any, json_length: int | None,
                forward: bool = True, headers: AnswerHeaders = infer_headers, encoding: str | None = None,
                trace: Trace | None = None, kept: bool = True,
                on_error: Callable[[ServerError], HttpResponse] | None = error_answer) -> InferAnswer:  # fmt: skip
    """Begin the inference `body` asks of model `name` (a JSON header of `json_length` bytes, None: all of it; 0: the
    raw data of the model's one input), the one way every HTTP infer route begins one: parsed (a kept JSON header is
    not parsed again: `HeaderCache`; `kept` False: parsed in full and not kept, for a body inflated here), admitted
    (frontend/admission.py, HTTP's order: shared memory, header forwarding where `forward`, the decoupled refusal)
    and begun in the core. The client's access to `inference` is the route's to check first. Raises what is wrong
    with the request (ServerError, AccessDenied); the answer's errors go to `on_error` (see `InferAnswer`)."""
    core = app.core
    try:
        model = core.registry.get(name, version)
    except ServerError:
        if json_length == 0:
            raise
        model = None  # (raised again once the body is parsed and admitted: Triton's order)
    raw = None if json_length != 0 or model is None else raw_input_of(model.config, len(body))
    parse = app.header_cache.parse if kept else parse_infer_request
    infer_request, binary_default = parse(name, version, body, json_length, raw)
    app.admission.admit(infer_request, request, forward, model)
    if model is None:
        model = core.registry.get(name, version)
    if trace is not None:
        trace.received(infer_request, HTTP_RECV_END)
    return InferAnswer(core.begin(infer_request, model), infer_request.outputs, binary_default, headers, encoding,
                       trace, app.tracer, on_error)


async def answered(answer: InferAnswer) -> HttpResponse:
    """Await a begun request's answer (for a route run as a coroutine); a caller that leaves withdraws it."""
    try:
        await answer.future
    except asyncio.CancelledError:
        answer.cancel()
        raise
    except Exception:  # noqa: BLE001 - `answer` answers it
        pass
    return answer.answer()


__all__ = ["STATUS_TO_HTTP", "HttpClient", "InferAnswer", "accepted_encoding", "answered", "begin_infer", "compress",
           "error_answer", "header_length", "infer_headers"]
