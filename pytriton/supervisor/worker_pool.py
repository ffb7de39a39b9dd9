"""Spawns the worker processes of one model, restarts the ones that die, stops them all on shutdown.

A worker is forked from the server's worker template (pytriton/supervisor/template.py: a process that imported
what every worker imports, and nothing else) or, where that cannot be done safely or the template is off or
unavailable, `python -m pytriton.backends.worker <spec>` started with asyncio's subprocess support (a fresh
interpreter; nothing is ever forked from the server). Either way the worker is its own process, pinned to its GPU
before it imports the model's code, and looks the same to the rest of the server. A worker that dies fails its
in-flight requests through the router, its shared-memory segments are unlinked, and a new one is started.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from pytriton.backends.spec import WorkerSpec
from pytriton.config.gpus import GpuDevice, visible_gpus
from pytriton.model_config.triton_model_config import TritonModelConfig
from pytriton.proxy.arena import unlink_segments
from pytriton.proxy.router import ProxyRouter, WorkerLink
from pytriton.scheduler.instance import InstanceHandler, InstanceStatus
from pytriton.supervisor.instance import LinkedInstance
from pytriton.supervisor.template import FRESH_PARAMETER, ForkedProcess, TemplateUnavailable, WorkerTemplate, \
    worker_environment

SPEC_ARG_MAX = 64 * 1024  # a worker's specification larger than this goes to it on its standard input

logger = logging.getLogger("pytriton.supervisor")

RESTART_BACKOFF_S = (0.1, 0.5, 1.0, 2.0, 5.0)
FATAL_GRACE_S = 5.0  # generous: only a worker that exited before it was ready waits for its reason
_POOL_SERIALS = itertools.count(1)  # see WorkerPool.serial


class WorkerStartError(RuntimeError):
    """A worker could not start (the callable failed to import, or the process exited)."""


def _describe_exit(process: Any) -> str:
    note = getattr(process, "exit_note", "")  # (a ForkedProcess whose template died before it said how it ended)
    if note:
        return f"exited ({note})"
    returncode = process.returncode
    if returncode is None:
        return "is not running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"was killed by {name}"
    return f"exited with code {returncode}"


class WorkerInstance:
    """One model instance: its process, its router link, and how often it was restarted."""

    def __init__(self, index: int, device: int | None, gpu: GpuDevice | None = None):
        self.index = index
        self.device = device  # the visible GPU id (None: CPU)
        self.gpu = gpu  # that GPU as discovered (None: CPU, or a GPU id no discovery knows)
        self.generation = 0
        self.restarts = 0
        self.process: asyncio.subprocess.Process | ForkedProcess | None = None
        self.link: WorkerLink | None = None
        self.serving: LinkedInstance | None = None  # what the scheduler dispatches to while the worker is up
        self.watcher: asyncio.Task[Any] | None = None

    def status(self, label: str) -> InstanceStatus:
        up = self.link is not None and not self.link.closed and self.serving is not None
        alive = self.process is not None and self.process.returncode is None
        return InstanceStatus(label, up, self.restarts, self.process.pid if alive and self.process else None,
                              self.device, self.gpu.uuid if self.gpu else "",
                              self.link.warmup if self.link is not None else ())

    @property
    def cuda_visible_devices(self) -> str | None:
        """The worker's CUDA_VISIBLE_DEVICES: the physical GPU behind its visible id (None: a CPU instance).

        A GPU id that discovery does not know (a config given through the Python API on a machine where no GPU
        was found) is passed on as it is, as before discovery existed."""
        if self.device is None:
            return None
        return self.gpu.cuda_visible_devices if self.gpu is not None else str(self.device)


class InstanceRoster:
    """The instances of one model as an instance source reports them: each configured instance, and the
    `LinkedInstance` the scheduler dispatches to while it serves."""

    def __init__(self, router: ProxyRouter, config: TritonModelConfig):
        self.router = router
        self.config = config
        self.handler: InstanceHandler | None = None
        devices = config.instance_devices()
        gpus = visible_gpus() if any(d is not None for d in devices) else []
        self.instances = [WorkerInstance(i, dev, gpus[dev] if dev is not None and 0 <= dev < len(gpus) else None)
                          for i, dev in enumerate(devices)]

    def bind(self, handler: InstanceHandler) -> None:
        self.handler = handler

    def describe(self) -> list[InstanceStatus]:
        return [instance.status(self._label(instance)) for instance in self.instances]

    def _label(self, instance: WorkerInstance) -> str:
        """Triton's instance name: <instance group>_<index in the group> (`TritonModelConfig.instance_places`)."""
        return self.config.instance_places()[instance.index].name

    def _serve(self, instance: WorkerInstance, link: WorkerLink, kill: Callable[[str], None]) -> None:
        """The instance is up: the scheduler may dispatch to it; `kill` is what to do if it gets stuck. A worker
        that says it stopped serving (FATAL) leaves at once (`_lost`)."""
        instance.serving = LinkedInstance(self.router, link, kill=kill, streaming=self.config.decoupled)
        link.on_fatal = lambda error: self._lost(instance, link, self._fatal_reason(link, error))
        if self.handler is not None:
            self.handler.add_instance(instance.serving)

    def _fatal_reason(self, link: WorkerLink, error: str) -> str:
        return f"the worker of model instance '{link.label}' (pid {link.pid}) stopped serving: {error}"

    def _lost(self, instance: WorkerInstance, link: WorkerLink, reason: str) -> None:
        """The worker behind `link` stopped serving: the instance leaves the scheduler before its calls fail (so
        that their room goes to no waiting job), then the link is dropped."""
        logger.error("%s", reason)
        if instance.link is link:
            self._unserve(instance)
        self.router.drop_link(link, reason)

    def _unserve(self, instance: WorkerInstance) -> None:
        serving, instance.serving = instance.serving, None
        if serving is not None and self.handler is not None:
            self.handler.remove_instance(serving)


class WorkerPool(InstanceRoster):
    """The worker processes of one model: an instance source for its scheduler."""

    def __init__(
        self,
        router: ProxyRouter,
        config: TritonModelConfig,
        callable_target: str,
        log_level: str = "INFO",
        start_timeout_s: float = 120.0,
        extra_env: dict[str, str] | None = None,
        template: WorkerTemplate | None = None,
        model_log: str = "",
    ):
        super().__init__(router, config)
        self.model_log = model_log  # the server's logging settings for the models' pb_utils.Logger (model_log.py)
        self.template = template  # None: every worker starts in a fresh interpreter
        self._fresh_reason: str | None = None  # why this model's workers start fresh (logged once)
        self.callable_target = callable_target
        self.log_level = log_level
        self.start_timeout_s = start_timeout_s
        self.extra_env = extra_env or {}
        self._stopping = False
        # Distinguishes this pool's workers from those of an earlier pool of the same model that may still run
        # (a reload swaps pools while the old one finishes its requests): their router identities must differ.
        self.serial = next(_POOL_SERIALS)

    def _kill_stuck(self, instance: WorkerInstance, reason: str) -> None:
        """An execution outlived the execution timeout: kill the worker; its watcher restarts it."""
        process = instance.process
        if process is not None and process.returncode is None:
            logger.error("killing worker pid %d of model instance '%s': %s", process.pid, self._label(instance), reason)
            try:
                process.kill()
            except ProcessLookupError:
                pass

    def _env(self, instance: WorkerInstance) -> dict[str, str]:
        base = worker_environment()
        env = dict(base)
        if instance.cuda_visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = instance.cuda_visible_devices
        env.update(self.extra_env)
        env["PYTHONPATH"] = base["PYTHONPATH"]
        return env

    def _fork_refusal(self, env: dict[str, str]) -> str | None:
        """Why this worker starts in a fresh interpreter rather than from the template (None: from the template)."""
        if self.config.backend_parameters.get(FRESH_PARAMETER, "").strip().lower() == "fresh":
            return f"its configuration sets parameter {FRESH_PARAMETER} to 'fresh'"
        assert self.template is not None
        return self.template.refusal(env)

    def _note_fresh(self, label: str, reason: str) -> None:
        if reason != self._fresh_reason:
            self._fresh_reason = reason
            logger.info("model instance '%s' starts in a fresh interpreter, not from the worker template: %s",
                        label, reason)

    async def _start_process(self, instance: WorkerInstance, label: str, spec: dict[str, Any]
                             ) -> asyncio.subprocess.Process | ForkedProcess:  # fmt: skip
        """The worker's process: forked from the template where it can be, else a fresh interpreter."""
        env = self._env(instance)
        if self.template is not None:
            reason = self._fork_refusal(env)
            if reason is None:
                try:
                    return await self.template.fork(WorkerSpec.for_process(**spec, forked=True).to_json(), env,
                                                    os.getcwd())
                except TemplateUnavailable as exc:
                    reason = str(exc)
            self._note_fresh(label, reason)
        text = WorkerSpec.for_process(**spec).to_json()
        if len(text) <= SPEC_ARG_MAX:
            return await asyncio.create_subprocess_exec(
                sys.executable, "-m", "pytriton.backends.worker", text, env=env
            )
        # a large configuration: through a pipe (one command-line argument holds 128 KiB at most on Linux)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "pytriton.backends.worker", "-", env=env, stdin=asyncio.subprocess.PIPE,
        )
        assert process.stdin is not None
        process.stdin.write(text.encode())
        process.stdin.close()  # (the transport writes the rest as the worker reads; a worker gone drops it)
        return process

    async def _spawn(self, instance: WorkerInstance) -> None:
        """Start one worker process and wait until it says hello (or fails)."""
        instance.generation += 1
        identity = f"{self.config.model_name}#{instance.index}#{self.serial}.{instance.generation}"
        label = self._label(instance)
        link = self.router.add_link(identity.encode(), label)
        spec = dict(
            address=self.router.address,
            identity=identity,
            tag=self.router.tag,
            inline_max=self.router.inline_max,
            config=self.config,
            callable=self.callable_target,
            instance=instance.index,
            log_level=self.log_level,
            model_log=self.model_log,
        )
        try:
            process = await self._start_process(instance, label, spec)
        except BaseException:
            self.router.drop_link(link, f"model instance '{label}' failed to start")
            raise
        instance.process = process
        instance.link = link
        exited = asyncio.ensure_future(process.wait())
        try:
            done, _ = await asyncio.wait(
                {link.hello, exited}, timeout=self.start_timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
            if link.hello in done and link.hello.exception() is None:
                logger.info("model instance '%s' started (pid %d)", label, process.pid)
                instance.watcher = asyncio.ensure_future(self._watch(instance, link, process, exited))
                self._serve(instance, link, kill=lambda reason: self._kill_stuck(instance, reason))
                return
            if exited.done() and not link.hello.done():
                # The worker reports why it cannot start (FATAL) before it exits: the exit may be seen first.
                await asyncio.wait({link.hello}, timeout=FATAL_GRACE_S)
            reason = (
                str(link.hello.exception())
                if link.hello.done() and link.hello.exception() is not None
                else f"worker {_describe_exit(process)} before it was ready"
                if exited.done()
                else f"worker did not become ready within {self.start_timeout_s:.0f} s"
            )
        except BaseException:
            await self._kill(process)
            self.router.drop_link(link, f"model instance '{label}' failed to start")
            raise
        await self._kill(process)
        if not exited.done():
            exited.cancel()
        self.router.drop_link(link, f"model instance '{label}' failed to start: {reason}")
        unlink_segments(self.router.tag, process.pid)
        raise WorkerStartError(f"model instance '{label}' failed to start: {reason}")

    async def _kill(self, process: asyncio.subprocess.Process | ForkedProcess) -> None:
        if process.returncode is None:
            try:
                process.kill()
            except ProcessLookupError:
                pass
            await process.wait()

    async def _watch(
        self,
        instance: WorkerInstance,
        link: WorkerLink,
        process: asyncio.subprocess.Process | ForkedProcess,
        exited: asyncio.Future[Any],
    ) -> None:
        """Wait for the worker to exit; if it was not asked to, fail its requests and start a new one."""
        await exited
        label = self._label(instance)
        self._unserve(instance)
        what = f"worker process of model instance '{label}' (pid {process.pid}) {_describe_exit(process)}"
        if self._stopping:
            self.router.drop_link(link, f"{what} while the server was stopping")
            unlink_segments(self.router.tag, process.pid)
            return
        self.router.drop_link(
            link,
            f"Failed to process the request(s) for model '{label}', message: {what}; it is being restarted",
        )
        unlink_segments(self.router.tag, process.pid)
        logger.error("%s; restarting it", what)
        attempt = 0
        while not self._stopping:
            delay = RESTART_BACKOFF_S[min(attempt, len(RESTART_BACKOFF_S) - 1)]
            await asyncio.sleep(delay)
            if self._stopping:
                return
            instance.restarts += 1
            try:
                await self._spawn(instance)
                return
            except WorkerStartError as exc:
                attempt += 1
                logger.error("%s", exc)
                if self.handler is not None and not any(i.link is not None and not i.link.closed
                                                        for i in self.instances):
                    self.handler.set_unavailable(str(exc))

    async def start(self) -> None:
        """Start every instance; raise WorkerStartError (after stopping the others) if one cannot start."""
        results = await asyncio.gather(*(self._spawn(i) for i in self.instances), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.stop(timeout_s=5.0)
            raise errors[0]

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Stop every worker within `timeout_s`, killing the ones that do not exit; remove their segments.

        Restarts come first: a watcher between restarts, or spawning a worker that has not said hello yet (and
        so would never get STOP), is cancelled, which kills the process it was starting.
        """
        self._stopping = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        watchers = [i.watcher for i in self.instances if i.watcher is not None]
        while watchers:  # a spawn that completed as it was cancelled leaves a new watcher: cancel that one too
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
            watchers = [i.watcher for i in self.instances if i.watcher is not None and not i.watcher.done()]
        processes = []
        for instance in self.instances:
            if instance.link is not None and not instance.link.closed:
                self.router.stop_worker(instance.link)
            if instance.process is not None and instance.process.returncode is None:
                processes.append(instance.process)
        if processes:
            await asyncio.wait([asyncio.ensure_future(p.wait()) for p in processes],
                               timeout=max(0.0, deadline - loop.time()))
            for p in processes:
                if p.returncode is None:
                    logger.warning("worker pid %d did not stop within %.1f s; killing it", p.pid, timeout_s)
        for instance in self.instances:
            if instance.process is not None:
                await self._kill(instance.process)
                unlink_segments(self.router.tag, instance.process.pid)
            self._unserve(instance)
            if instance.link is not None and not instance.link.closed:
                self.router.drop_link(instance.link, f"model instance '{self._label(instance)}' was stopped "
                                     "(the model was unloaded or the server is stopping)")
