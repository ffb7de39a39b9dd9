"""Triton's Vertex AI endpoint on a port of its own: the health route (AIP_HEALTH_ROUTE) and the predict route
(AIP_PREDICT_ROUTE), which runs the default model or, with `X-Vertex-Ai-Triton-Redirect: <KServe route>`, the
read-only KServe routes and inference on any model."""

from __future__ import annotations

import logging
import re

from pytriton.exceptions import ServerError, invalid_arg
from pytriton.frontend.access import AccessDenied
from pytriton.frontend.http.app import Handler, HttpApp
from pytriton.frontend.http.infer_begin import STATUS_TO_HTTP
from pytriton.frontend.http.platform_infer import VERTEX_AI_BINARY_MIME, platform_infer
from pytriton.frontend.http1 import HttpRequest, HttpResponse, error_response

logger = logging.getLogger("pytriton.frontend")

REDIRECT_HEADER = "x-vertex-ai-triton-redirect"
_MODEL = re.compile(
    r"/v2/models/([^/]+)(?:/versions/([0-9]+))?(?:/(infer|generate|generate_stream|ready|config|stats|trace/setting))?"
)
_SERVER = re.compile(r"/v2(?:/health/(live|ready))?")
_SHARED_MEMORY = re.compile(r"/v2/(system|cuda)sharedmemory(?:/region/([^/]+))?/(status|register|unregister)")
_REPOSITORY = re.compile(r"/v2/repository(?:/([^/]+))?/(index|models/([^/]+)/(load|unload))")
_READ_ONLY_MODEL_ROUTES = ("ready", "config", "stats", "")


def default_model(index: list[dict[str, str]], name: str) -> str:
    """The model the predict route runs: `name`, which must be ready, or else the only ready model (ValueError with
    Triton's words otherwise)."""
    names = [entry["name"] for entry in index]
    if not name:
        if len(names) != 1:
            raise ValueError("Expect the model repository contains only a single model if default model is not "
                             "specified")
        return names[0]
    if name not in names:
        raise ValueError(f"Expect the default model '{name}' is loaded")
    return name


class VertexAiApp:
    """Maps Vertex AI's routes onto the KServe HTTP app (and the metrics renderer, for the `metrics` redirect)."""

    def __init__(self, app: HttpApp, predict_route: str, health_route: str, model: str | None,
                 metrics: Handler | None = None, requested_model: str = ""):
        self.app = app
        self.predict = re.compile(predict_route)
        self.health = re.compile(health_route)
        self.model = model  # None: chosen at the first prediction (a server whose models are added after it starts)
        self.requested_model = requested_model  # --vertex-ai-default-model
        self.metrics = metrics

    def _default_model(self) -> str:
        if self.model is None:
            try:
                return default_model(self.app.core.repository_index(True), self.requested_model)
            except ValueError as exc:
                raise invalid_arg(str(exc)) from None
        return self.model

    async def handle(self, request: HttpRequest) -> HttpResponse:
        try:
            if self.health.fullmatch(request.path):
                return await self._as(request, request.method, "/v2/health/ready")
            if self.predict.fullmatch(request.path):
                redirect = request.headers.get(REDIRECT_HEADER)
                if redirect is None:
                    return await platform_infer(self.app, request, self._default_model(), "", VERTEX_AI_BINARY_MIME,
                                                False)
                return await self._redirect(request, "/" + redirect)
        except ServerError as exc:
            return error_response(STATUS_TO_HTTP.get(exc.status, 400), exc.message)
        except AccessDenied as exc:
            return error_response(403, str(exc))
        return HttpResponse(400)  # Triton: any other route is a bad request, without a body

    async def _as(self, request: HttpRequest, method: str, path: str) -> HttpResponse:
        """`request` answered by the KServe app as `method path`."""
        return await self.app.handle(HttpRequest(method, path, "", request.headers, request.body, request.peer))

    async def _redirect(self, request: HttpRequest, route: str) -> HttpResponse:
        """The KServe route `route` (the redirect header's value), as Triton allows it: read-only routes (answered as
        their GET), inference, and the repository index; changes (shared-memory registration, model load/unload)
        are refused with 403."""
        if request.method != "POST":
            return HttpResponse(405)
        logger.debug("Vertex AI request redirected to %s", route)
        if route == "/metrics":
            if self.metrics is None:
                return HttpResponse(400)
            return await self.metrics(HttpRequest("GET", "/metrics", "", request.headers, b"", request.peer))
        if route == "/v2/models/stats":
            return await self._as(request, "GET", route)
        match = _MODEL.fullmatch(route)
        if match:
            name, version, kind = match.group(1), match.group(2) or "", match.group(3) or ""
            if kind == "infer":
                return await platform_infer(self.app, request, name, version, VERTEX_AI_BINARY_MIME, False)
            if kind in _READ_ONLY_MODEL_ROUTES:
                return await self._as(request, "GET", route)
        if _SERVER.fullmatch(route):
            return await self._as(request, "GET", route)
        match = _SHARED_MEMORY.fullmatch(route)
        if match:
            return await self._as(request, "GET", route) if match.group(3) == "status" else HttpResponse(403)
        match = _REPOSITORY.fullmatch(route)
        if match:
            return await self._as(request, "POST", route) if match.group(2) == "index" else HttpResponse(403)
        return HttpResponse(400)
