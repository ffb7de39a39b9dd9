"""The server end of the control channel: loads and unloads models for the process that started or joined the
server (`pytriton.triton`), through ServerCore's public API. The core itself never sees a control message."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from pytriton.config.trace import model_trace_settings
from pytriton.core.server_core import ServerCore
from pytriton.core.settings import TraceSettings
from pytriton.exceptions import ServerError
from pytriton.proxy.control import (
    ControlMessageError,
    ControlReply,
    ControlRequest,
    InfoReply,
    InfoRequest,
    LoadReply,
    LoadRequest,
    ModelReadyReply,
    ModelReadyRequest,
    ServerInfo,
    UnloadReply,
    UnloadRequest,
    error_reply,
    parse_request,
)
from pytriton.supervisor.host import WorkerHost
from pytriton.supervisor.worker_pool import WorkerStartError

logger = logging.getLogger("pytriton.server")


class ControlService:
    """Answers control requests that arrive on the core's router; `close()` cancels the ones still running."""

    def __init__(self, core: ServerCore, host: WorkerHost, trace_settings: TraceSettings | None = None):
        assert host.router is not None, "start the worker host first"
        self.core = core
        self.trace_settings = trace_settings
        self.host = host
        self.router = host.router
        self._tasks: set[asyncio.Future[Any]] = set()
        self.router.on_control = self._on_control

    def info(self) -> ServerInfo:
        return ServerInfo(address=self.host.address, tag=self.host.tag, server_pid=os.getpid(),
                          inline_max=self.host.inline_max)

    def _on_control(self, identity: bytes, payload: str) -> None:
        task = asyncio.ensure_future(self._answer(identity, payload))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, identity: bytes, payload: str) -> None:
        op: str | None = None
        try:
            request = parse_request(payload)
            op = request.OP
            text = (await self.handle(request)).to_json(op)
        except ControlMessageError as exc:
            logger.warning("bad control request: %s", exc)
            text = error_reply(exc.op or op, str(exc))
        except Exception as exc:  # noqa: BLE001 - the controlling process gets the reason
            logger.warning("control request '%s' failed: %s", op, exc)
            # a worker that cannot start says so in full; other exceptions are named by their class
            text = error_reply(op, str(exc) if isinstance(exc, WorkerStartError) else f"{type(exc).__name__}: {exc}")
        self.router.reply_control(identity, text)

    async def handle(self, request: ControlRequest[Any]) -> ControlReply:
        """Carry out one request; an exception is the reason it failed."""
        if isinstance(request, InfoRequest):
            return InfoReply(self.info())
        if isinstance(request, LoadRequest):
            name = request.config.model_name
            await self.core.unload_model(name)  # a load replaces a model of the same name
            if request.trace_config and self.trace_settings is not None:
                self.trace_settings.update(model_trace_settings(request.trace_config), name, client=False)
            if request.hosting == "external":
                # The hosting process starts its instances once it has their identities: the model becomes ready
                # in the background, when they have connected.
                source = self.host.external_instances(request.config, request.timeout_s)
                identities = source.identities()
                self._background(self.core.add_model(request.config, source), name)
                return LoadReply(self.info(), identities)
            assert request.callable is not None  # LoadRequest checks it
            await self.core.add_model(request.config, self.host.worker_pool(request.config, request.callable))
            return LoadReply(self.info())
        if isinstance(request, UnloadRequest):
            await self.core.unload_model(request.model)
            return UnloadReply(self.info())
        if isinstance(request, ModelReadyRequest):
            try:
                ready = self.core.registry.get(request.model).ready
            except ServerError:
                ready = False
            return ModelReadyReply(self.info(), ready)
        raise ControlMessageError(f"no handler for control operation '{request.OP}'")

    def _background(self, coroutine: Any, name: str) -> None:
        async def run() -> None:
            try:
                await coroutine
            except Exception as exc:  # noqa: BLE001 - nobody awaits it: say why in the log
                logger.error("model '%s' did not become ready: %s", name, exc or type(exc).__name__)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop answering: requests still being carried out are cancelled."""
        if self.router.on_control == self._on_control:
            self.router.on_control = None
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
