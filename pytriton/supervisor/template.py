"""The server's side of the worker template (pytriton/backends/template.py): starts it, asks it for workers, watches
them, restarts it when it dies, stops it with the server.

A forked worker is a `ForkedProcess`: what the worker pool uses of an `asyncio.subprocess.Process` (pid, returncode,
kill(), wait()). Its pidfd comes from the template, opened before the template could reap it, so the server never
signals a pid that was reused; the pidfd says when the worker ended and the template, which reaps it, says how.

A worker the template cannot fork safely (its environment sets a variable read when a process starts otherwise than
the template's, its model asks for a fresh interpreter) or while the template is unavailable, starts in a fresh
interpreter as before; the pool logs why.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import logging
import os
import signal
import socket
import sys
from typing import Any

from pytriton.backends.template import ENV_ROOM, ENV_ROOM_VARIABLE, environment_bytes
from pytriton.config.env import MALLOC_TUNABLES

logger = logging.getLogger("pytriton.supervisor")

# Variables read when a process or a library the template imported starts: a worker that needs other values than
# the template's is started fresh. (CUDA_VISIBLE_DEVICES is not one: the template loads no CUDA library.)
STARTUP_VARIABLES = ("PYTHON", "LD_", "GLIBC_TUNABLES", "MALLOC_", "OPENBLAS_", "OMP_", "MKL_", "GOTO", "NUMPY_",
                     "ZMQ_", "LANG", "LC_")
FRESH_PARAMETER = "PYTRITON_WORKER_START"  # a model's config parameter; "fresh": its workers never come from the template
READY_TIMEOUT_S = 60.0
FORK_TIMEOUT_S = 30.0
STATUS_GRACE_S = 5.0  # how long a worker's exit status may lag behind its pidfd
RETRY_AFTER_S = 5.0  # a template that could not start is not tried again before this
UNKNOWN_EXIT = 255  # a forked worker's returncode when its template died before it could say


class TemplateUnavailable(RuntimeError):
    """The template cannot fork a worker now (it failed to start, died, or is stopping); the message says why."""


def worker_environment() -> dict[str, str]:
    """The environment every worker process starts with (before its own CUDA_VISIBLE_DEVICES and extra variables)."""
    env = dict(os.environ)
    env.setdefault("GLIBC_TUNABLES", MALLOC_TUNABLES)
    # The worker must import the same pytriton and the user's module as the server does.
    path = [p for p in sys.path if p]
    if os.getcwd() not in path:
        path.insert(0, os.getcwd())
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def startup_difference(template_env: dict[str, str], env: dict[str, str]) -> list[str]:
    """The variables read at start-up that `env` sets otherwise than the template's environment."""
    names = {k for k in (*template_env, *env) if k.startswith(STARTUP_VARIABLES)}
    return sorted(k for k in names if template_env.get(k) != env.get(k))


class ForkedProcess:
    """A worker forked from the template (see the module's docstring)."""

    def __init__(self, pid: int, pidfd: int):
        self.pid = pid
        self.returncode: int | None = None
        self.exit_note = ""  # set when the exit status is unknown: why
        self._pidfd = pidfd
        self._orphaned = False  # its template died: nobody will say how it ended
        self._ended_at: float | None = None
        self._grace: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._loop.add_reader(pidfd, self._ended)

    def _ended(self) -> None:
        """The pidfd is readable: the worker has exited; its status comes from the template (or never, if it died)."""
        self._loop.remove_reader(self._pidfd)
        self._ended_at = self._loop.time()
        if self._orphaned:
            self.finish(None, "its exit status is unknown: the worker template that forked it is gone")
        else:
            self._grace = self._loop.call_later(STATUS_GRACE_S, self.finish, None,
                                                "its exit status never came from the worker template")

    def template_gone(self) -> None:
        self._orphaned = True
        if self._ended_at is not None:
            self.finish(None, "its exit status is unknown: the worker template that forked it is gone")

    def finish(self, code: int | None, note: str = "") -> None:
        if self._done.done():
            return
        if self._grace is not None:
            self._grace.cancel()
        if self._ended_at is None:
            self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = -1
        self.returncode = UNKNOWN_EXIT if code is None else code
        self.exit_note = note
        self._done.set_result(None)

    def send_signal(self, signum: int) -> None:
        if self.returncode is not None or self._pidfd < 0:
            raise ProcessLookupError(self.pid)
        signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    async def wait(self) -> int:
        await asyncio.shield(self._done)
        assert self.returncode is not None
        return self.returncode


class WorkerTemplate:
    """The server's worker template process: one per server, owned by the worker host."""

    def __init__(self) -> None:
        self.env: dict[str, str] = {}
        self.pid: int | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._sock: socket.socket | None = None
        self._ready: asyncio.Future[None] | None = None
        self._starting: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._send_lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[tuple[int, int]]] = {}
        self._children: dict[int, ForkedProcess] = {}
        self._fds: collections.deque[int] = collections.deque()
        self._buffer = b""
        self._failed_at: float | None = None
        self._failure = ""
        self._stopping = False
        self.starts = 0

    @property
    def serving(self) -> bool:
        return self._sock is not None

    def refusal(self, env: dict[str, str]) -> str | None:
        """Why a worker with environment `env` cannot be forked from the template (None: it can)."""
        if self.serving:
            differ = startup_difference(self.env, env)
            if differ:
                return (f"its environment sets {', '.join(differ)} otherwise than the worker template's (read when a "
                        "process starts)")
            if len(environment_bytes(env)) > len(environment_bytes(self.env)):
                return "its environment is larger than the room the worker template keeps for it"
        return None

    def start_soon(self) -> None:
        """Start the template in the background (the first fork waits for it); outside the event loop, nothing."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._starting is None or self._starting.done():
            self._starting = loop.create_task(self._ensure())

    async def _ensure(self) -> None:
        async with self._lock:
            if self.serving or self._stopping:
                return
            loop = asyncio.get_running_loop()
            if self._failed_at is not None and loop.time() - self._failed_at < RETRY_AFTER_S:
                return
            try:
                await self._start()
                self._failed_at = None
            except Exception as exc:  # noqa: BLE001 - workers start fresh meanwhile
                self._failed_at = loop.time()
                self._failure = str(exc)
                logger.error("the worker template could not start: %s; workers start in fresh interpreters", exc)

    async def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.env = worker_environment()
            self.env[ENV_ROOM_VARIABLE] = "." * ENV_ROOM
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "pytriton.backends.template", str(theirs.fileno()), str(os.getpid()),
                env=self.env, pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        loop = asyncio.get_running_loop()
        self._process, self._sock, self._buffer = process, ours, b""
        self._ready = loop.create_future()
        loop.add_reader(ours.fileno(), self._readable)
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), READY_TIMEOUT_S)
        except BaseException as exc:
            self._close_socket()
            if process.returncode is None:
                process.kill()
            await process.wait()
            if isinstance(exc, asyncio.TimeoutError):
                raise RuntimeError(f"it was not ready within {READY_TIMEOUT_S:.0f} s") from None
            raise
        self.pid = process.pid
        self.starts += 1
        logger.info("worker template ready: process %d", process.pid)
        asyncio.ensure_future(self._watch(process))

    def _readable(self) -> None:
        sock = self._sock
        assert sock is not None
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, fds = b"", []
        self._fds.extend(fds)
        if not data:
            self._close_socket()
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if line:
                self._message(json.loads(line))

    def _message(self, message: dict[str, Any]) -> None:
        if "exit" in message:
            child = self._children.pop(message["exit"], None)
            if child is not None:
                child.finish(int(message["code"]))
        elif "id" in message:
            future = self._pending.pop(message["id"], None)
            if "pid" in message:
                pidfd = self._fds.popleft()  # (each pid comes with its pidfd, in order)
                if future is None or future.done():  # the spawn was cancelled: the worker must not live on
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    os.close(pidfd)
                else:
                    future.set_result((message["pid"], pidfd))
            elif future is not None and not future.done():
                future.set_exception(TemplateUnavailable(f"the worker template could not fork: {message['error']}"))
        elif self._ready is not None and not self._ready.done():
            if "ready" in message:
                self._ready.set_result(None)
            else:
                self._ready.set_exception(RuntimeError(str(message.get("failed"))))

    def _close_socket(self) -> None:
        """The template is gone (or being stopped): forks waiting fail, children lose their exit statuses."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        asyncio.get_running_loop().remove_reader(sock.fileno())
        sock.close()
        while self._fds:
            os.close(self._fds.popleft())
        for future in self._pending.values():
            if not future.done():
                future.set_exception(TemplateUnavailable("the worker template is gone"))
        self._pending.clear()
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(RuntimeError("it exited before it was ready"))
        children, self._children = self._children, {}
        for child in children.values():
            child.template_gone()

    async def _watch(self, process: asyncio.subprocess.Process) -> None:
        code = await process.wait()
        if process is not self._process:
            return
        self._close_socket()
        if self._stopping:
            return
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        logger.error("worker template (pid %d) %s; starting a new one", process.pid, how)
        self.start_soon()

    async def fork(self, spec: str, env: dict[str, str], cwd: str) -> ForkedProcess:
        """A worker forked from the template (TemplateUnavailable when there is none to fork from)."""
        if self._stopping:
            raise TemplateUnavailable("the worker template is stopping")
        self.start_soon()
        assert self._starting is not None
        await asyncio.shield(self._starting)
        sock = self._sock
        if sock is None:
            raise TemplateUnavailable(f"the worker template is unavailable: {self._failure or 'it is gone'}")
        loop = asyncio.get_running_loop()
        request_id = next(self._ids)
        future: asyncio.Future[tuple[int, int]] = loop.create_future()
        self._pending[request_id] = future
        line = json.dumps({"fork": request_id, "spec": spec, "env": env, "cwd": cwd}).encode() + b"\n"
        try:
            # One request at a time on the socket, each whole even if its fork is cancelled meanwhile (a line cut
            # short would garble the next one).
            await asyncio.shield(self._send(sock, line))
            pid, pidfd = await asyncio.wait_for(future, FORK_TIMEOUT_S)
        except (OSError, ValueError, asyncio.TimeoutError) as exc:  # (ValueError: its socket was closed meanwhile)
            raise TemplateUnavailable(f"the worker template did not answer: {exc or type(exc).__name__}") from None
        finally:
            self._pending.pop(request_id, None)
        child = ForkedProcess(pid, pidfd)
        self._children[pid] = child
        return child

    async def _send(self, sock: socket.socket, line: bytes) -> None:
        async with self._send_lock:
            await asyncio.get_running_loop().sock_sendall(sock, line)

    async def stop(self) -> None:
        """Stop the template (its workers are the pools' to stop; they were stopped first)."""
        self._stopping = True
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        process = self._process
        self._close_socket()  # (the template's end of the socket sees EOF and exits)
        if process is not None:
            try:
                await asyncio.wait_for(asyncio.shield(process.wait()), 5.0)
            except asyncio.TimeoutError:
                process.kill()
                await process.wait()
