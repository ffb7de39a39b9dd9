"""Triton's HTTP/REST routes on top of the core; errors become `{"error": msg}` with Triton's codes."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from pytriton.core.peers import register_shm, statistics_of_all, unregister_shm
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.core.trace import HTTP_RECV_START, Tracer, now_ns
from pytriton.exceptions import ServerError, Status, invalid_arg, unsupported
from pytriton.frontend.access import AccessDenied, AccessPolicy, is_local_peer
from pytriton.frontend.admission import Admission
from pytriton.frontend.http.generate import generate
from pytriton.frontend.http.infer_begin import (
    HttpClient,
    InferAnswer,
    accepted_encoding,
    answered,
    begin_infer,
    compress,
    error_answer,
    header_length,
)
from pytriton.frontend.http.infer_cache import HeaderCache
from pytriton.frontend.http.repository import load_parameters, unload_dependents
from pytriton.frontend.http.routes import Params, Route, RouteTable
from pytriton.frontend.http1 import HttpRequest, HttpResponse, error_response
from pytriton.frontend.model_config_json import model_config_json

logger = logging.getLogger("pytriton.frontend")

JSON = [("Content-Type", "application/json")]
TOO_LARGE_HINT = " Use --http-max-input-size to increase the limit."
# Compressed bodies are inflated this much at a time, so that a bomb stops one step past the input limit.
INFLATE_STEP = 1024 * 1024


def json_response(value: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(status, [orjson.dumps(value)], list(JSON))


_compress = compress  # (the name tests know)


class _TooLarge(Exception):
    """The request body is larger than the input limit (answered with 413)."""


def _refusal(exc: ServerError | AccessDenied | _TooLarge) -> HttpResponse:
    """The answer to a request refused by `begin` or its route's handler: Triton's error for a ServerError, 403 for a
    denied endpoint, 413 for a body past its limit."""
    if isinstance(exc, ServerError):
        return error_answer(exc)
    return error_response(403 if isinstance(exc, AccessDenied) else 413, str(exc))


def _decompress(body: bytes | bytearray, encoding: str | None, limit: int) -> bytes | bytearray:
    """The body inflated, a step at a time: never more than `limit` (plus one step) bytes of it exist."""
    if not encoding or encoding == "identity" or not body:
        return body
    encoding = encoding.strip().lower()
    if encoding not in ("gzip", "deflate"):
        raise unsupported(f"unsupported Content-Encoding '{encoding}'")
    decompressor = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    data = body
    inflated = bytearray()
    try:
        while True:
            step = decompressor.decompress(data, INFLATE_STEP)
            inflated += step
            if len(inflated) > limit:
                raise _TooLarge(
                    f"request size of more than {limit} bytes after {encoding} decompression exceeds the maximum "
                    f"allowed input size of {limit} bytes.{TOO_LARGE_HINT}"
                )
            data = decompressor.unconsumed_tail
            if decompressor.eof or (not data and len(step) < INFLATE_STEP):
                break
    except zlib.error as exc:
        raise invalid_arg(f"failed to decompress the {encoding} request body: {exc}") from None
    if not decompressor.eof:
        raise invalid_arg(f"failed to decompress the {encoding} request body: the compressed data is incomplete")
    return inflated


def _json(body: bytes | bytearray) -> Any:
    """A request's JSON body ({} when empty)."""
    if not body.strip():
        return {}
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise invalid_arg(f"failed to parse the request JSON buffer: {exc}") from None


def _uint(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise invalid_arg(f"Unable to parse '{field}': attempt to access JSON non-unsigned-integer as unsigned-integer")
    return value


class HttpApp:
    """Maps Triton's REST routes to the core: one route table (`ROUTES`, at the end of this module), each request's path
    matched once (`begin`, else `handle`)."""

    too_large_hint = TOO_LARGE_HINT

    def __init__(
        self,
        core: ServerCore,
        log_settings: LogSettings,
        trace_settings: TraceSettings,
        header_forward_pattern: str | None = None,
        max_input_bytes: int = 64 * 1024 * 1024,
        access: AccessPolicy | None = None,
        connection_info: dict[str, Any] | None = None,
        tracer: Tracer | None = None,
        routes: RouteTable | None = None,
    ):
        self.core = core
        self.tracer = tracer or Tracer(trace_settings)
        self.connection_info = connection_info  # where a RemoteTriton on this host connects to host models
        self.access = access or AccessPolicy()
        self.admission = Admission(self.access, HttpClient(), "http", header_forward_pattern)
        self.log_settings = log_settings
        self.trace_settings = trace_settings
        self.max_input_bytes = max_input_bytes
        self.routes = routes or ROUTES
        self._config_cache: dict[tuple[str, int], tuple[Any, bytes]] = {}
        self.header_cache = HeaderCache()  # parsed JSON headers of binary infer requests (`begin_infer`)

    def begin(self, request: HttpRequest) -> HttpResponse | InferAnswer | None:
        """Match the request's route (once), check the client's access and the method in the route's order, and answer
        what can be answered without a coroutine: a refusal (404, 405, 403), or a route with a `begin` (inference: its
        pending answer, for the connection to send from a callback; an answer known at once). None: `handle` runs the
        route, which it finds on the request."""
        found = self.routes.match(request.path)
        if found is None:
            return error_response(404, "Not Found")
        route, params = found
        methods = route.methods
        try:
            if route.method_first and methods and request.method not in methods:
                return error_response(405, "Method Not Allowed")
            group = route.group
            if group is not None and group in self.admission.restricted:
                self.admission.check(group, request)
            if methods and request.method not in methods:
                return error_response(405, "Method Not Allowed")
            if route.begin is not None:
                started: HttpResponse | InferAnswer = route.begin(self, request, params)
                return started
        except (ServerError, AccessDenied, _TooLarge) as exc:
            return _refusal(exc)
        request.route = found
        return None

    async def handle(self, request: HttpRequest) -> HttpResponse:
        """Answer `request`: its route as `begin` left it on the request, else `begin` now (a begun request awaited)."""
        found = request.route
        if found is None:
            started = self.begin(request)
            if started is not None:
                return started if isinstance(started, HttpResponse) else await answered(started)
            found = request.route
        route, params = found
        try:
            response: HttpResponse = await route.handler(self, request, params)
            return response
        except (ServerError, AccessDenied, _TooLarge) as exc:
            return _refusal(exc)

    def check(self, group: str, request: HttpRequest) -> None:
        """Raise AccessDenied unless the client may use the endpoint `group`."""
        self.admission.check(group, request)

    # ---- routes ------------------------------------------------------------------------------
    async def _server_metadata(self, request: HttpRequest, params: Params) -> HttpResponse:
        return json_response(self.core.server_metadata())

    async def _health(self, request: HttpRequest, params: Params) -> HttpResponse:
        ok = self.core.live if params["state"] == "live" else self.core.ready
        return HttpResponse(200 if ok else 400)

    def _not_found(self, request: HttpRequest, params: Params) -> HttpResponse:
        return error_response(404, "Not Found")

    async def _all_stats(self, request: HttpRequest, params: Params) -> HttpResponse:
        return json_response({"model_stats": await statistics_of_all(self.core)})

    async def _model_metadata(self, request: HttpRequest, params: Params) -> HttpResponse:
        return json_response(self.core.model_metadata(params["model"], params.get("version", "")))

    async def _model_ready(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            ready = self.core.model_ready(params["model"], params.get("version", ""))
        except ServerError as exc:  # an unknown model or version is not ready (Triton: 400, not 404)
            if exc.status is not Status.NOT_FOUND:
                raise
            ready = False
        return HttpResponse(200) if ready else error_response(400, "Model version not ready")

    async def _model_config(self, request: HttpRequest, params: Params) -> HttpResponse:
        return self._config(params["model"], params.get("version", ""))

    async def _model_stats(self, request: HttpRequest, params: Params) -> HttpResponse:
        return json_response({"model_stats": await statistics_of_all(self.core, params["model"],
                                                                     params.get("version", ""))})

    async def _model_trace(self, request: HttpRequest, params: Params) -> HttpResponse:
        return self._trace(request, params["model"])

    async def _server_trace(self, request: HttpRequest, params: Params) -> HttpResponse:
        return self._trace(request, None)

    async def _generate(self, request: HttpRequest, params: Params) -> HttpResponse:
        """Triton's generate extension (frontend/http/generate.py): `generate`, or `generate_stream` (`streaming`)."""
        return await generate(self.core, request, params["model"], params.get("version", ""), params["streaming"])

    async def _connection(self, request: HttpRequest, params: Params) -> HttpResponse:
        """Where a RemoteTriton on this host connects to host models (local clients only, repository token)."""
        if not is_local_peer(request.peer):
            raise AccessDenied("This API is restricted to clients on the server's host")
        if self.connection_info is None:
            return error_response(404, "Not Found")
        if "refused" in self.connection_info:  # (a server that cannot host a RemoteTriton's models says why)
            raise unsupported(self.connection_info["refused"])
        return json_response(self.connection_info)

    async def _shared_memory(self, request: HttpRequest, params: Params) -> HttpResponse:
        name = params.get("region", "")
        action = params["action"]
        shm = self.core.shm
        system = params["kind"] == "system"
        if action == "status":
            return json_response(shm.system_status(name) if system else shm.cuda_status(name))
        if action == "unregister":
            await unregister_shm(self.core, "system" if system else "cuda", name)
            return HttpResponse(200)
        kind = "system" if system else "cuda"
        if not name:
            raise invalid_arg(f"'region name' is necessary to register {kind} shared memory region")
        body = self._json_body(request)
        if not isinstance(body, dict):
            raise invalid_arg("Shared memory register request must be a JSON object")
        if system:
            if "key" not in body:
                raise invalid_arg("Shared memory register request has no 'key' field")
            if "byte_size" not in body:
                raise invalid_arg("Shared memory register request has no 'byte_size' field")
            key = body["key"]
            if not isinstance(key, str):
                raise invalid_arg("Unable to parse 'key': attempt to access JSON non-string as string")
            await register_shm(self.core, "system", name, key, _uint(body.get("offset", 0), "offset"),
                               _uint(body["byte_size"], "byte_size"))
        else:
            raw = body.get("raw_handle")
            if not isinstance(raw, dict) or not isinstance(raw.get("b64"), str):
                raise invalid_arg("Shared memory register request has no 'raw_handle' field")
            if "device_id" not in body:
                raise invalid_arg("Shared memory register request has no 'device_id' field")
            if "byte_size" not in body:
                raise invalid_arg("Shared memory register request has no 'byte_size' field")
            await register_shm(self.core, "cuda", name, raw["b64"], _uint(body["device_id"], "device_id"),
                               _uint(body["byte_size"], "byte_size"))
        return HttpResponse(200)

    def _config(self, name: str, version: str) -> HttpResponse:
        model = self.core.registry.get(name, version)
        key = (model.name, model.version)
        cached = self._config_cache.get(key)
        if cached is None or cached[0] is not model:
            cached = self._config_cache[key] = (model, orjson.dumps(model_config_json(model.config)))
        return HttpResponse(200, [cached[1]], list(JSON))

    def _json_body(self, request: HttpRequest) -> Any:
        return _json(_decompress(request.body, request.headers.get("content-encoding"), self.max_input_bytes))

    def _trace(self, request: HttpRequest, model: str | None) -> HttpResponse:
        if model is not None:
            try:
                self.core.registry.get(model)
            except ServerError:
                raise invalid_arg(f"Request for unknown model : {model}") from None
        if request.method == "GET":
            return json_response(self.trace_settings.get(model))
        changes = self._json_body(request)
        if not isinstance(changes, dict):
            raise invalid_arg("trace settings must be a JSON object")
        return json_response(self.trace_settings.update(changes, model))

    async def _logging(self, request: HttpRequest, params: Params) -> HttpResponse:
        if request.method == "GET":
            return json_response(self.log_settings.get())
        changes = self._json_body(request)
        if not isinstance(changes, dict):
            raise invalid_arg("log settings must be a JSON object")
        return json_response(self.log_settings.update(changes))

    async def _repository(self, request: HttpRequest, params: Params) -> HttpResponse:
        rest: list[str] = params["rest"]
        if rest == ["index"]:
            body = self._repository_body(request, "the repository index")
            ready_only = bool(body.get("ready", False)) if isinstance(body, dict) else False
            return json_response(self.core.repository_index(ready_only))
        if len(rest) == 3 and rest[0] == "models" and rest[2] in ("load", "unload"):
            return await self._load_unload(request, rest[1], rest[2])
        if len(rest) >= 2 and rest[0] not in ("models", "index"):
            raise unsupported("'repository_name' specification is not supported")
        return error_response(404, "Not Found")

    def _repository_body(self, request: HttpRequest, what: str) -> Any:
        """The JSON body of a repository request, refused before it is parsed when larger than a load may be (its
        configuration override and, where the server allows uploads, its files: see `repository_request_bytes`)."""
        limit = self.core.repository_request_bytes(http=True)

        def too_large(size: str) -> ServerError:
            return invalid_arg(f"{what}: the request is {size} bytes, larger than the limit of {limit} bytes for a "
                               "repository request (a load's 'config' parameter, and its files where the server "
                               "allows uploads: --allow-model-upload)")

        if len(request.body) > limit:
            raise too_large(str(len(request.body)))
        try:
            body = _decompress(request.body, request.headers.get("content-encoding"), limit)
        except _TooLarge:
            raise too_large(f"more than {limit}") from None
        return _json(body)

    async def _load_unload(self, request: HttpRequest, name: str, action: str) -> HttpResponse:
        control = self.core.repository_control()
        body = self._repository_body(request, f"failed to {action} '{name}'")
        if action == "unload":
            await control.unload(name, unload_dependents(body))
        else:
            await control.load(name, load_parameters(body))
        return HttpResponse(200)  # (as tritonserver 2.51: no body)

    # ---- inference ---------------------------------------------------------------------------
    def _begin_infer(self, request: HttpRequest, params: Params) -> InferAnswer:
        """KServe's infer route (its access and method checked): a traced request gets the HTTP front-end's receive
        timestamps, a compressed body is inflated (within the input limit; its JSON header parsed in full, not kept:
        compressed requests are rare, and the route's attack tests take them as the reference), the answer is
        compressed where the client accepts gzip or deflate; the rest is `begin_infer`'s."""
        name = params["model"]
        version = params.get("version", "")
        tracer = self.tracer
        trace = None
        if tracer.active:
            received = now_ns()
            trace = tracer.start(name, version, request.headers.get("traceparent"))
            if trace is not None:
                trace.stamp(HTTP_RECV_START, received)
        try:
            headers = request.headers
            body = request.body
            encoding = headers.get("content-encoding")
            if encoding is not None:  # (the connection bounds the body as received (413), `_decompress` as inflated)
                body = _decompress(body, encoding, self.max_input_bytes)
            length_text = headers.get("inference-header-content-length")
            json_length = None if length_text is None else header_length(length_text)
            accept = headers.get("accept-encoding")  # (http.client sends "identity")
            return begin_infer(self, request, name, version, body, json_length,
                               encoding=None if accept is None else accepted_encoding(accept), trace=trace,
                               kept=body is request.body)
        except BaseException:
            if trace is not None:
                tracer.finish(trace)
            raise


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


def _routes() -> RouteTable:
    """KServe's routes under /v2, Triton's checks in Triton's order (see routes.py for the patterns)."""
    table = RouteTable()
    table.add("", Route("metadata", ("GET",), HttpApp._server_metadata))
    for state in ("live", "ready"):
        table.add(f"health/{state}", Route("health", ("GET",), HttpApp._health, method_first=True,
                                           params={"state": state}))
    table.add("models/stats", Route("statistics", ("GET",), HttpApp._all_stats))
    model_routes = {
        "": Route("metadata", ("GET",), HttpApp._model_metadata),
        "infer": Route("inference", ("POST",), begin=HttpApp._begin_infer),
        "ready": Route("health", ("GET",), HttpApp._model_ready),
        "config": Route("model-config", ("GET",), HttpApp._model_config),
        "stats": Route("statistics", ("GET",), HttpApp._model_stats),
        "trace/setting": Route("trace", ("GET", "POST"), HttpApp._model_trace),
        "generate": Route("inference", ("POST",), HttpApp._generate, params={"streaming": False}),
        "generate_stream": Route("inference", ("POST",), HttpApp._generate, params={"streaming": True}),
        "{*action}": Route("metadata", (), begin=HttpApp._not_found),  # another model route: 404, as Triton answers
    }
    for action, route in model_routes.items():
        table.add(f"models/{{model}}/{action}", route, versions=True)
    # a version that is not a number: 404, without an access check
    table.add("models/{model}/versions/{*rest}", Route(None, (), begin=HttpApp._not_found))
    table.add("trace/setting", Route("trace", ("GET", "POST"), HttpApp._server_trace))
    table.add("logging", Route("logging", ("GET", "POST"), HttpApp._logging))
    table.add("repository/{*rest}", Route("model-repository", ("POST",), HttpApp._repository))
    for kind in ("system", "cuda"):
        for action, method in (("status", "GET"), ("register", "POST"), ("unregister", "POST")):
            route = Route("shared-memory", (method,), HttpApp._shared_memory, method_first=True,
                          params={"kind": kind, "action": action})
            table.add(f"{kind}sharedmemory/{action}", route)
            table.add(f"{kind}sharedmemory/region/{{region}}/{action}", route)
    table.add("pytriton/connection", Route("model-repository", ("GET",), HttpApp._connection, method_first=True))
    return table


ROUTES = _routes()
