"""Triton's model loading API of workers (`pb_utils.load_model`, `unload_model`, `is_model_ready`): a worker's
MODEL_LOADING message goes to the same repository control as the repository extension's load and unload, under its
rules (model control mode explicit, uploads only where allowed, names checked, the repository limits), and is
always answered.

A call waits on the server's loop, never on the worker's: the worker waits for its answer as it waits for a BLS
answer. Calls that would wait for themselves are not left to hang: a model loading itself, or a model whose load
waits, through other models' loads, for the caller's own load (A loads B from `initialize`, B loads A), is refused;
an unload of the caller's own model (or of a model waiting for the caller) is answered once it has begun, since it
waits for the caller's execution to end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pytriton.core.repository import RepositoryControl
from pytriton.exceptions import ServerError, Status
from pytriton.proxy.messages import ModelLoading
from pytriton.proxy.router import ProxyRouter, WorkerLink

logger = logging.getLogger("pytriton.supervisor")

_CODES = list(Status)  # in the order of pb_utils.TritonError's codes


class ModelLoadingBridge:
    """Serves the model loading calls of every worker of a router. `control` gives the repository control (or raises
    Triton's refusal when the server has none); `ready(name, version)` is the model ready endpoint's answer."""

    def __init__(self, router: ProxyRouter, control: Callable[[], RepositoryControl],
                 ready: Callable[[str, str], bool]):
        self.router = router
        self.control = control
        self.ready = ready
        # Until the server has started, calls are refused as Triton refuses them (the API is for a running server).
        self.started = False
        self._waits: list[tuple[str, str]] = []  # (caller, model) of each load or unload a worker waits for now
        self._tasks: set[asyncio.Task[None]] = set()
        router.on_model_loading = self._on_message

    def _on_message(self, link: WorkerLink, message: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(link, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, link: WorkerLink, message: Any) -> None:
        loading = message.loading
        name, caller = message.model_name, loading.caller
        try:
            if not self.started:
                raise ServerError(Status.UNAVAILABLE, "Server not ready")
            if loading.op == ModelLoading.READY:
                ready = self._is_ready(name, message.model_version)
                self.router.send_model_loading_answer(link, message.id, ready=ready)
                return
            if loading.op == ModelLoading.LOAD:
                await self._load(name, caller, loading)
            else:
                await self._unload(name, caller, loading.unload_dependents)
        except ServerError as exc:
            self.router.send_model_loading_answer(link, message.id, error=exc.message,
                                                  error_code=_CODES.index(exc.status))
            return
        except Exception as exc:
            logger.exception("model loading call of model instance '%s' for model '%s' failed", link.label, name)
            self.router.send_model_loading_answer(link, message.id, error=f"internal error: {exc}", error_code=1)
            return
        self.router.send_model_loading_answer(link, message.id)

    def _is_ready(self, name: str, version: str) -> bool:
        try:
            return self.ready(name, version)
        except ServerError:  # a model (or version) not served is not ready
            return False

    def _waits_for(self, model: str, caller: str) -> bool:
        """Whether a load or unload of `model` that a worker of `model` waits for leads back to `caller`."""
        seen: set[str] = set()
        todo = [model]
        while todo:
            current = todo.pop()
            if current == caller:
                return True
            if current in seen:
                continue
            seen.add(current)
            todo.extend(target for who, target in self._waits if who == current)
        return False

    async def _load(self, name: str, caller: str, loading: Any) -> None:
        control = self.control()
        if caller and self._waits_for(name, caller):
            why = ("a model cannot load itself" if name == caller else
                   f"model '{name}' waits for a load or unload that model '{caller}' made")
            raise ServerError(Status.UNAVAILABLE, f"failed to load '{name}': {why} (it would wait for itself)")
        parameters: dict[str, str | bytes] = dict(loading.files)
        if loading.config:
            parameters["config"] = loading.config
        wait = (caller, name)
        self._waits.append(wait)
        try:
            await control.load(name, parameters)
        finally:
            self._waits.remove(wait)

    async def _unload(self, name: str, caller: str, unload_dependents: bool) -> None:
        control = self.control()
        task = asyncio.get_running_loop().create_task(control.unload(name, unload_dependents))
        if caller and self._waits_for(name, caller):
            # It waits for the caller's execution: answered once begun (its refusals come at once), finished later.
            await asyncio.sleep(0)
            if task.done():
                task.result()
                return
            self._tasks.add(task)
            task.add_done_callback(self._finished)
            return
        wait = (caller, name)
        self._waits.append(wait)
        try:
            await task
        finally:
            self._waits.remove(wait)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("unload requested by a model failed: %s", task.exception())

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
