"""Triton's SageMaker multi-model routes: `GET /models` (models loaded through them), `GET /models/<name>`,
`POST /models` (load `{"model_name", "url"}` from a local directory `<root>/<hash>/model[/<subdir>]`),
`DELETE /models/<name>` (unload) and `POST /models/<name>/invoke`. The server must serve a model repository under
model control "explicit" (Triton's registration needs it); the archive SageMaker unpacked is registered as a model
repository and its model loaded under the target model's name."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping

import orjson

from pytriton.exceptions import ServerError, Status, invalid_arg
from pytriton.frontend.http.app import HttpApp, json_response
from pytriton.frontend.http.infer_begin import STATUS_TO_HTTP
from pytriton.frontend.http.platform_infer import SAGEMAKER_BINARY_MIME, platform_infer
from pytriton.frontend.http1 import HttpRequest, HttpResponse, error_response

logger = logging.getLogger("pytriton.frontend")

DEFAULT_MODELS_ROOT = "/opt/ml/models"  # where SageMaker unpacks the archives it loads (Triton's required prefix)
MODELS_ROOT_VARIABLE = "PYTRITON_SAGEMAKER_MODELS_ROOT"  # another root, e.g. for tests off SageMaker
TARGET_MODEL_HEADER = "x-amzn-sagemaker-target-model"
_ENSEMBLE = re.compile(r"platform:(\s)*\"ensemble\"")
# Triton's messages that make a failed load or invocation a 507 (out of memory) instead of a 400.
OUT_OF_MEMORY = ("CUDA out of memory", "CUDA_OUT_OF_MEMORY", "Out of memory", "Out Of Memory", "out of memory",
                 "MemoryError", "OutOfMemory", "OOM", "Dst tensor is not initialized", "Src tensor is not initialized",
                 "CNMEM_STATUS_OUT_OF_MEMORY", "CUDNN_STATUS_NOT_INITIALIZED", "CUBLAS_STATUS_ALLOC_FAILED",
                 "CUBLAS_STATUS_NOT_INITIALIZED", "Failed to allocate memory", "failed to allocate memory",
                 "No space left on device")


def _failure(exc: ServerError) -> HttpResponse:
    """A failed load or invocation: 507 when the message says memory ran out, else 400 (as Triton's endpoint)."""
    status = 507 if any(text in exc.message for text in OUT_OF_MEMORY) else 400
    return error_response(status, exc.message)


class MultiModel:
    """The models loaded through the multi-model routes: name (SageMaker's hash) -> (repository, target model)."""

    def __init__(self, app: HttpApp, environ: Mapping[str, str]):
        self.app = app
        root = environ.get(MODELS_ROOT_VARIABLE) or DEFAULT_MODELS_ROOT
        self.root = os.path.abspath(root)
        self._path = re.compile(re.escape(self.root) + r"/([0-9A-Za-z._]+)/(model)/?([0-9A-Za-z._]+)?")
        self.models: dict[str, tuple[str, str]] = {}

    async def handle(self, request: HttpRequest, name: str, action: str) -> HttpResponse:
        method = request.method
        if method == "GET":
            self.app.check("model-repository", request)
            return self._get(name) if name else self._list()
        if method == "POST" and action == "/invoke":
            return await self._invoke(request, name)
        if method == "POST" and not action:
            self.app.check("model-repository", request)
            return await self._load(request)
        if method == "DELETE":
            self.app.check("model-repository", request)
            return await self._unload(request, name)
        return HttpResponse(400)

    def _list(self) -> HttpResponse:
        ready = {entry["name"] for entry in self.app.core.repository_index(True)}
        models = [{"modelName": name, "modelUrl": folder} for name, (folder, target) in self.models.items()
                  if target in ready]
        return json_response({"models": models})

    def _get(self, name: str) -> HttpResponse:
        if name not in self.models:
            return HttpResponse(404)
        return json_response({"modelName": name, "modelUrl": self.models[name][0]})

    async def _invoke(self, request: HttpRequest, name: str) -> HttpResponse:
        self.app.check("inference", request)
        if name not in self.models:
            return HttpResponse(404)
        target = request.headers.get(TARGET_MODEL_HEADER) or name
        logger.info("Invoking SageMaker TargetModel: %s", target)
        try:
            return await platform_infer(self.app, request, target, "", SAGEMAKER_BINARY_MIME,
                                        binary_in_content_type=True)
        except ServerError as exc:
            return _failure(exc)

    async def _load(self, request: HttpRequest) -> HttpResponse:
        body = request.body
        try:
            fields = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError as exc:
            raise invalid_arg(f"failed to parse the request JSON buffer: {exc}") from None
        if not isinstance(fields, dict):
            raise invalid_arg("failed to parse the load model request: expected a JSON object")
        name, url = fields.get("model_name", ""), fields.get("url", "")
        if not isinstance(name, str) or not isinstance(url, str):
            raise invalid_arg("failed to parse the load model request: 'model_name' and 'url' must be strings")
        target = request.headers.get(TARGET_MODEL_HEADER) or name
        path = os.path.abspath(os.path.normpath(url)) if url else os.path.abspath(".")
        if path.startswith(("/dev/", "/proc/", "/sys/")):
            return HttpResponse(400)
        match = self._path.fullmatch(path)
        if match is None:
            raise invalid_arg(
                f"Invalid \"url\" '{url}': expected a path of the form {self.root}/<hash>/model[/<subdir>]"
            )
        real_root = os.path.realpath(self.root)
        if os.path.commonpath([real_root, os.path.realpath(path)]) != real_root:  # a symbolic link out of the root
            raise invalid_arg(f"Invalid \"url\" '{url}': it leads out of {self.root} (a symbolic link?)")
        control = self.app.core.repository
        if control is None or getattr(control, "mode", "explicit") != "explicit":
            raise invalid_arg("repository registration is not allowed if model control mode is not EXPLICIT")
        if os.path.isfile(os.path.join(path, "config.pbtxt")):  # the archive is one model's folder
            folder, subdir = os.path.join(self.root, match.group(1)), match.group(2)
        else:  # the archive holds model folders: the ensemble among them, else the last one listed
            folder, subdir = path, _model_folder(path)
        logger.info("Loading SageMaker TargetModel: %s", target)
        if not os.path.isdir(folder):
            raise invalid_arg(f"failed to register '{folder}', repository not found")
        try:
            control.register(folder, {subdir: target})
        except ServerError as exc:
            return error_response(409 if exc.status is Status.ALREADY_EXISTS else 400, exc.message)
        try:
            await control.load(target, {})
        except ServerError as exc:
            control.unregister(folder)
            return error_response(409, exc.message) if exc.status is Status.ALREADY_EXISTS else _failure(exc)
        self.models[name] = (folder, target)
        return HttpResponse(200)

    async def _unload(self, request: HttpRequest, name: str) -> HttpResponse:
        if name not in self.models:
            return HttpResponse(404)
        # The model loaded under `name`, whatever the request's target header says (another model is not this
        # route's to unload, and `name` would be dropped while its model stays loaded).
        folder, target = self.models[name]
        control = self.app.core.repository_control()
        logger.info("Unloading SageMaker TargetModel: %s", target)
        try:
            await control.unload(target, unload_dependents=True)
        except ServerError as exc:
            return error_response(400, exc.message)
        del self.models[name]
        try:
            control.unregister(folder)
        except ServerError as exc:
            return error_response(STATUS_TO_HTTP.get(exc.status, 400), exc.message)
        return HttpResponse(200)


def _model_folder(path: str) -> str:
    """Which model folder of an unpacked archive is loaded: the ensemble, else the last folder listed ("" if none)."""
    chosen, ensemble = "", ""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return ""
    for entry in entries:
        if not entry.is_dir():
            continue
        chosen = entry.name
        try:
            with open(os.path.join(path, entry.name, "config.pbtxt"), encoding="utf-8") as f:
                if _ENSEMBLE.search(f.read()):
                    ensemble = entry.name
        except OSError:
            continue
    return ensemble or chosen
