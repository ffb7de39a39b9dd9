"""Triton's HTTP/REST routes on top of the core; errors become `{"error": msg}` with Triton's codes."""

from __future__ import annotations

import gzip
import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import Any, cast
from urllib.parse import unquote

import orjson

from pytriton.core.peers import register_shm, statistics_of_all, unregister_shm
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.core.trace import (
    HTTP_RECV_END,
    HTTP_RECV_START,
    HTTP_SEND_END,
    HTTP_SEND_START,
    Trace,
    Tracer,
    finish_on_sent,
    now_ns,
)
from pytriton.core.types import InferResponse
from pytriton.exceptions import ServerError, Status, invalid_arg, unsupported
from pytriton.frontend.access import AccessDenied, AccessPolicy, is_local_peer
from pytriton.frontend.header_forwarding import compile_forward_pattern, forward_headers
from pytriton.frontend.http.generate import generate
from pytriton.frontend.http.infer import encode_infer_response, parse_infer_request, raw_input_of
from pytriton.frontend.http.infer_begin import (
    InferAnswer,
    begin_infer,
    error_answer,
    infer_headers,
)
from pytriton.frontend.http.infer_begin import accepted_encoding as _accepted_encoding
from pytriton.frontend.http.infer_begin import header_length as _header_length
from pytriton.frontend.http.infer_cache import HeaderCache
from pytriton.frontend.http.repository import load_parameters, unload_dependents
from pytriton.frontend.http1 import HttpRequest, HttpResponse, error_response
from pytriton.frontend.model_config_json import model_config_json

logger = logging.getLogger("pytriton.frontend")

JSON = [("Content-Type", "application/json")]
TOO_LARGE_HINT = " Use --http-max-input-size to increase the limit."
# Compressed bodies are inflated this much at a time, so that a bomb stops one step past the input limit.
INFLATE_STEP = 1024 * 1024


def json_response(value: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(status, [orjson.dumps(value)], list(JSON))


def _compress(data: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(data, compresslevel=6)
    return zlib.compress(data)


class _TooLarge(Exception):
    """The request body is larger than the input limit (answered with 413)."""


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


_MODEL_ROUTE_GROUPS = {
    "infer": "inference",
    "ready": "health",
    "config": "model-config",
    "stats": "statistics",
    "trace/setting": "trace",
    "generate": "inference",
    "generate_stream": "inference",
}


def _uint(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise invalid_arg(f"Unable to parse '{field}': expected an unsigned integer")
    return value


class HttpApp:
    """Maps Triton's REST routes to the core."""

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
    ):
        self.core = core
        self.tracer = tracer or Tracer(trace_settings)
        self.connection_info = connection_info  # where a RemoteTriton on this host connects to host models
        self.access = access or AccessPolicy()
        self.log_settings = log_settings
        self.trace_settings = trace_settings
        self.forward = compile_forward_pattern(header_forward_pattern) if header_forward_pattern else None
        self.max_input_bytes = max_input_bytes
        self._config_cache: dict[tuple[str, int], tuple[Any, bytes]] = {}
        self.header_cache = HeaderCache()  # parsed JSON headers of binary infer requests (`begin`)

    async def handle(self, request: HttpRequest) -> HttpResponse:
        try:
            return await self._route(request)
        except ServerError as exc:
            return error_answer(exc)
        except AccessDenied as exc:
            return error_response(403, str(exc))
        except _TooLarge as exc:
            return error_response(413, str(exc))

    def begin(self, request: HttpRequest) -> HttpResponse | InferAnswer | None:
        """The infer route without a coroutine (`infer_begin.begin_infer`), for the connection to answer from a
        callback; None: `handle` answers the request."""
        return begin_infer(self, request)

    def check(self, group: str, request: HttpRequest) -> None:
        self._check(group, request)

    def _check(self, group: str, request: HttpRequest) -> None:
        self.access.enforce(group, lambda: request.headers, request.peer, "http")  # AccessDenied: 403

    # ---- routing -----------------------------------------------------------------------------
    async def _route(self, request: HttpRequest) -> HttpResponse:
        parts = [unquote(p) for p in request.path.split("/")[1:]]
        if not parts or parts[0] != "v2":
            return error_response(404, "Not Found")
        rest = parts[1:]
        method = request.method
        if rest and rest[-1] == "" and len(rest) > 1:
            rest = rest[:-1]
        if not rest or rest == [""]:
            self._check("metadata", request)
            return self._only(method, "GET") or json_response(self.core.server_metadata())
        head = rest[0]
        if head == "health" and len(rest) == 2 and rest[1] in ("live", "ready"):
            if bad := self._only(method, "GET"):
                return bad
            self._check("health", request)
            ok = self.core.live if rest[1] == "live" else self.core.ready
            return HttpResponse(200 if ok else 400)
        if head == "models":
            return await self._models(request, rest[1:])
        if head == "trace" and rest[1:] == ["setting"]:
            self._check("trace", request)
            return self._trace(request, None)
        if head == "logging" and len(rest) == 1:
            self._check("logging", request)
            return self._logging(request)
        if head == "repository":
            self._check("model-repository", request)
            return await self._repository(request, rest[1:])
        if head in ("systemsharedmemory", "cudasharedmemory"):
            return await self._shared_memory(request, head, rest[1:])
        if head == "pytriton" and rest[1:] == ["connection"]:
            return self._connection(request)
        return error_response(404, "Not Found")

    def _connection(self, request: HttpRequest) -> HttpResponse:
        """Where a RemoteTriton on this host connects to host models (local clients only, repository token)."""
        if bad := self._only(request.method, "GET"):
            return bad
        self._check("model-repository", request)
        if not is_local_peer(request.peer):
            raise AccessDenied("This API is restricted to clients on the server's host")
        if self.connection_info is None:
            return error_response(404, "Not Found")
        if "refused" in self.connection_info:  # (a server that cannot host a RemoteTriton's models says why)
            raise unsupported(self.connection_info["refused"])
        return json_response(self.connection_info)

    async def _shared_memory(self, request: HttpRequest, head: str, rest: list[str]) -> HttpResponse:
        name = ""
        if len(rest) >= 2 and rest[0] == "region":
            name, rest = rest[1], rest[2:]
        if len(rest) != 1 or rest[0] not in ("status", "register", "unregister"):
            return error_response(404, "Not Found")
        action = rest[0]
        if bad := self._only(request.method, "GET" if action == "status" else "POST"):
            return bad
        self._check("shared-memory", request)
        shm = self.core.shm
        system = head == "systemsharedmemory"
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
                raise invalid_arg("Unable to parse 'key': expected a string")
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

    @staticmethod
    def _only(method: str, *allowed: str) -> HttpResponse | None:
        return None if method in allowed else error_response(405, "Method Not Allowed")

    async def _models(self, request: HttpRequest, rest: list[str]) -> HttpResponse:
        method = request.method
        if rest == ["stats"]:
            self._check("statistics", request)
            return self._only(method, "GET") or json_response({"model_stats": await statistics_of_all(self.core)})
        if not rest or not rest[0]:
            return error_response(404, "Not Found")
        name, rest = rest[0], rest[1:]
        version = ""
        if len(rest) >= 2 and rest[0] == "versions":
            if not rest[1].isdigit():
                return error_response(404, "Not Found")
            version, rest = rest[1], rest[2:]
        action = "/".join(rest)
        self._check(_MODEL_ROUTE_GROUPS.get(action, "metadata"), request)
        if action == "infer":
            if self.tracer.active:
                return self._only(method, "POST") or await self._traced_infer(request, name, version)
            return self._only(method, "POST") or await self._infer(request, name, version)
        if action == "":
            return self._only(method, "GET") or json_response(self.core.model_metadata(name, version))
        if action == "ready":
            if bad := self._only(method, "GET"):
                return bad
            try:
                ready = self.core.model_ready(name, version)
            except ServerError as exc:  # an unknown model or version is not ready (Triton: 400, not 404)
                if exc.status is not Status.NOT_FOUND:
                    raise
                ready = False
            return HttpResponse(200) if ready else error_response(400, "Model version not ready")
        if action == "config":
            return self._only(method, "GET") or self._config(name, version)
        if action == "stats":
            if bad := self._only(method, "GET"):
                return bad
            return json_response({"model_stats": await statistics_of_all(self.core, name, version)})
        if action == "trace/setting":
            return self._trace(request, name)
        if action in ("generate", "generate_stream"):
            streaming = action == "generate_stream"
            return self._only(method, "POST") or await generate(self.core, request, name, version, streaming)
        return error_response(404, "Not Found")

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
        if bad := self._only(request.method, "GET", "POST"):
            return bad
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

    def _logging(self, request: HttpRequest) -> HttpResponse:
        if bad := self._only(request.method, "GET", "POST"):
            return bad
        if request.method == "GET":
            return json_response(self.log_settings.get())
        changes = self._json_body(request)
        if not isinstance(changes, dict):
            raise invalid_arg("log settings must be a JSON object")
        return json_response(self.log_settings.update(changes))

    async def _repository(self, request: HttpRequest, rest: list[str]) -> HttpResponse:
        if bad := self._only(request.method, "POST"):
            return bad
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
        return json_response({})

    # ---- inference ---------------------------------------------------------------------------
    async def run_infer(
        self,
        request: HttpRequest,
        name: str,
        version: str,
        body: bytes | bytearray,
        header_length: int | None,
        trace: Trace | None = None,
        forward: bool = True,
    ) -> tuple[InferResponse, list[Any], int | None]:
        """Run the inference `body` asks for (JSON header of `header_length` bytes, None: all of it; 0: a raw input)
        and return the response (to release once sent), the body parts and the JSON header length (None: JSON
        only). Shared with the SageMaker and Vertex AI endpoints, which take the header length from elsewhere."""
        raw = self._raw_input(name, version, len(body)) if header_length == 0 else None
        # A bytearray when received into its own buffer or inflated; read as bytes (never resized).
        infer_request, binary_default = parse_infer_request(name, version, cast(bytes, body), header_length, raw)
        if any(t.data is None for t in infer_request.inputs) or any(
            "shared_memory_region" in o.parameters for o in infer_request.outputs
        ):
            self._check("shared-memory", request)
        if forward and self.forward is not None:
            forward_headers(self.forward, request.headers.items(), infer_request.parameters)
        model = self.core.registry.get(name, version)
        if model.config.decoupled:
            raise unsupported("HTTP end point doesn't support models with decoupled transaction policy")
        if trace is not None:
            trace.received(infer_request, HTTP_RECV_END)
        response = await self.core.infer(infer_request)
        if trace is not None:
            trace.stamp(HTTP_SEND_START)
        try:
            parts, json_length = encode_infer_response(response, infer_request.outputs, binary_default)
        except BaseException:
            response.release()
            raise
        return response, parts, json_length

    def _raw_input(self, name: str, version: str, body_size: int) -> tuple[str, str, tuple[int, ...]]:
        """The single input of a raw binary request (`Inference-Header-Content-Length: 0`)."""
        return raw_input_of(self.core.registry.get(name, version).config, body_size)

    async def _traced_infer(self, request: HttpRequest, name: str, version: str) -> HttpResponse:
        """An inference while tracing is on: the request may be traced (then with the HTTP front-end's timestamps)."""
        received = now_ns()
        trace = self.tracer.start(name, version, request.headers.get("traceparent"))
        if trace is None:
            return await self._infer(request, name, version)
        trace.stamp(HTTP_RECV_START, received)
        try:
            response = await self._infer(request, name, version, trace)
        except BaseException:
            self.tracer.finish(trace)
            raise
        response.on_sent = finish_on_sent(self.tracer, trace, HTTP_SEND_END, response.on_sent)
        return response

    async def _infer(self, request: HttpRequest, name: str, version: str, trace: Trace | None = None) -> HttpResponse:
        headers = request.headers
        # The connection bounds the body as received (413), `_decompress` as inflated.
        body = _decompress(request.body, headers.get("content-encoding"), self.max_input_bytes)
        length_text = headers.get("inference-header-content-length")
        header_length = None if length_text is None else _header_length(length_text)
        response, parts, json_length = await self.run_infer(request, name, version, body, header_length, trace)
        out_headers = infer_headers(json_length)
        encoding = _accepted_encoding(headers.get("accept-encoding"))
        if encoding is not None:
            data = b"".join(bytes(p) if isinstance(p, memoryview) else p for p in parts)
            response.release()
            out_headers.append(("Content-Encoding", encoding))
            return HttpResponse(200, [_compress(data, encoding)], out_headers)
        return HttpResponse(200, parts, out_headers, on_sent=response.release)


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]
