"""Triton's SageMaker endpoint on a port of its own: `GET /ping`, `POST /invocations` (inference on the default
model) and the multi-model routes `/models...` (sagemaker_mme.py)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from pytriton.config.platforms import sagemaker_settings
from pytriton.exceptions import ServerError, invalid_arg
from pytriton.frontend.access import AccessDenied
from pytriton.frontend.http.app import HttpApp
from pytriton.frontend.http.generate import generate
from pytriton.frontend.http.infer_begin import STATUS_TO_HTTP
from pytriton.frontend.http.platform_infer import SAGEMAKER_BINARY_MIME, platform_infer
from pytriton.frontend.http.sagemaker_mme import MultiModel
from pytriton.frontend.http1 import HttpRequest, HttpResponse, error_response

logger = logging.getLogger("pytriton.frontend")

_MODELS = re.compile(r"/models(?:/)?([^/]+)?(/invoke)?")


class SageMakerApp:
    """Maps SageMaker's routes onto the KServe HTTP app's handlers (health, inference)."""

    def __init__(self, app: HttpApp, environ: Mapping[str, str]):
        self.app = app
        settings = sagemaker_settings(environ)  # ValueError: a bad SAGEMAKER_TRITON_INFERENCE_TYPE
        self.default_model: str | None = settings["default_model"]
        self.ping_kind = "live" if settings["ping_mode"] == "live" else "ready"
        self.inference_type: str = settings["inference_type"]
        self.multi_model = MultiModel(app, environ)

    async def handle(self, request: HttpRequest) -> HttpResponse:
        path = request.path
        try:
            if path == "/ping":
                return await self.app.handle(HttpRequest(request.method, f"/v2/health/{self.ping_kind}", "",
                                                         request.headers, b"", request.peer))
            if path == "/invocations":
                return await self._invocations(request)
            match = _MODELS.fullmatch(path)
            if match:
                return await self.multi_model.handle(request, match.group(1) or "", match.group(2) or "")
        except ServerError as exc:
            return error_response(STATUS_TO_HTTP.get(exc.status, 400), exc.message)
        except AccessDenied as exc:
            return error_response(403, str(exc))
        return HttpResponse(400)  # Triton: any other route is a bad request, without a body

    async def _invocations(self, request: HttpRequest) -> HttpResponse:
        if self.inference_type != "infer":  # generate, generate_stream: the default model's generate route
            self.app.check("inference", request)
            if request.method != "POST":
                return error_response(405, "Method Not Allowed")
            return await generate(self.app.core, request, self._model(), "", self.inference_type == "generate_stream")
        return await platform_infer(self.app, request, self._model(), "", SAGEMAKER_BINARY_MIME,
                                    binary_in_content_type=True)

    def _model(self) -> str:
        """SAGEMAKER_TRITON_DEFAULT_MODEL_NAME, else the only model served (what Triton's SageMaker `serve` script
        picks when the repository holds one model)."""
        if self.default_model:
            return self.default_model
        names = sorted({entry["name"] for entry in self.app.core.repository_index(True)})
        if len(names) == 1:
            return names[0]
        served = ", ".join(names) if names else "none"
        raise invalid_arg(
            f"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME is not set and the server serves {len(names)} models ({served}): "
            "set it to the model that /invocations runs"
        )
