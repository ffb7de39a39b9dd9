"""The repository extension's requests: load (with a `config` override and `file:` uploads), unload and index, as
HTTP JSON bodies through `HttpApp` and gRPC messages through `InferenceServicer`, on a real `ServerCore` with the real
model controller (mode "explicit", auto-complete off, uploads allowed) over a repository of one model, `m`.

The override is parsed (`repository.overrides.parse_override`: protobuf's JSON format under the size and depth limits), uploads are written, and the configuration is read all the way to
the served configuration (`repository.load_versions`); only the start of the model's instances is left out (the
controller's host refuses it, so a load that gets that far fails with that refusal). An input is either an HTTP
request as `http_infer` reads it or "GRPC <method>", a line feed and the message. The route's own errors: over HTTP
an answer with Triton's status and a JSON error (500 only where Triton answers 500: a model it cannot find); over
gRPC DecodeError or the call ended with a status (the same INTERNAL only). After each input no upload folder may be
left behind, the controller forgets what it loaded, and every error it logged is a finding.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from typing import Any

import grpc
import orjson
from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2 as pb

from pytriton.core.server_core import ServerCore
from pytriton.core.settings import LogSettings, TraceSettings
from pytriton.exceptions import ServerError, Status
from pytriton.frontend.grpc.servicer import InferenceServicer
from pytriton.frontend.http.app import HttpApp
from pytriton.repository.control import ModelControl
from tests.fuzz.harness import Finding, Harness
from tests.fuzz.http_infer import outcome, parse_request
from tests.fuzz.shm_register import Aborted, CallContext

CONFIG = b"""backend: "python"
max_batch_size: 8
input [{ name: "INPUT", data_type: TYPE_FP32, dims: [-1] }]
output [{ name: "OUTPUT", data_type: TYPE_FP32, dims: [-1] }]
"""
INTERNAL_MESSAGES = ("failed to load '",)
GRPC_METHODS = {name: getattr(pb, f"{name}Request") for name in (
    "RepositoryModelLoad", "RepositoryModelUnload", "RepositoryIndex")}


class NoWorkers:
    """The controller's host: a model that would start its instances is refused here."""

    def worker_pool(self, config: Any, target: str) -> Any:
        raise ServerError(Status.UNAVAILABLE, "fuzzing: no worker starts")


class RepositoryHarness(Harness):
    name = "repository"
    max_len = 4096

    def setup(self) -> None:
        self.root = tempfile.mkdtemp(prefix="fuzz-repository-")
        self.folder = os.path.join(self.root, "models")
        self.uploads = os.path.join(self.root, "uploads")  # (where the controller writes uploads)
        os.mkdir(self.uploads)
        os.makedirs(os.path.join(self.folder, "m", "1"))
        with open(os.path.join(self.folder, "m", "config.pbtxt"), "wb") as f:
            f.write(CONFIG)
        with open(os.path.join(self.folder, "m", "1", "model.py"), "w") as f:
            f.write("class TritonPythonModel:\n    pass\n")
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._start())

    async def _start(self) -> None:
        self.core = ServerCore()
        await self.core.start()
        self.app = HttpApp(self.core, LogSettings(), TraceSettings())
        self.servicer = InferenceServicer(self.core)

    def close(self) -> None:
        self.loop.close()
        shutil.rmtree(self.root, ignore_errors=True)

    async def _http(self, data: bytes) -> None:
        status, body = outcome(await self.app.handle(parse_request(data)))
        if status == 200:
            return
        try:
            message = orjson.loads(body)["error"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise Finding(f"answer {status} without a JSON error", repr(body[:200])) from None
        if status >= 500 and not (status == 500 and message.startswith(INTERNAL_MESSAGES)) and status not in (501, 503):
            raise Finding(f"answer {status}", message)

    async def _grpc(self, data: bytes) -> None:
        line, _, message = data.partition(b"\n")
        method = line[len(b"GRPC "):].decode("latin-1").strip()
        request_cls: Any = GRPC_METHODS.get(method)
        if request_cls is None:
            return
        try:
            request = request_cls.FromString(message)
        except DecodeError:
            return
        try:
            await getattr(self.servicer, method)(request, CallContext())
        except Aborted as exc:
            if exc.code == grpc.StatusCode.INTERNAL and not exc.details.startswith(INTERNAL_MESSAGES):
                raise Finding("call ended INTERNAL", exc.details) from None
            if exc.code == grpc.StatusCode.UNKNOWN:
                raise Finding("call ended UNKNOWN", exc.details) from None

    async def _one(self, data: bytes) -> None:
        control = ModelControl(self.core, NoWorkers(), [self.folder], "explicit", auto_complete=False,
                               allow_uploads=True, upload_parent=self.uploads)
        self.core.repository = control
        try:
            if data.startswith(b"GRPC "):
                await self._grpc(data)
            else:
                await self._http(data)
        finally:
            await control.close()
            self.core.repository = None
        left = os.listdir(self.uploads)
        if left:
            for entry in left:
                shutil.rmtree(os.path.join(self.uploads, entry), ignore_errors=True)
            raise Finding("upload folder left behind", ", ".join(sorted(left)))

    def one_input(self, data: bytes) -> None:
        self.loop.run_until_complete(self._one(data))
