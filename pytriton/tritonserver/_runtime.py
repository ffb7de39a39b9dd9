"""The glue between the in-process API and pytriton's server: the server process's composition (`app.Server`:
core, worker host, model control; no network front-end) running on an asyncio loop in a background thread of the
caller's process. Every call into the core runs on that loop; callers' threads wait for it.

The runtime is owned by one `Server`: `stop()` stops the server (workers exit, shared memory is removed) and joins
the thread; a server its owner forgot is stopped when it is garbage collected or when the interpreter exits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import weakref
from typing import Any, Awaitable, Callable, TypeVar

from pytriton.config.server import ServerConfig
from pytriton.exceptions import ServerError
from pytriton.server.composition import STOP_OVERRUN_S
from pytriton.server.composition import Server as ComposedServer
from pytriton.tritonserver._errors import TritonError, UnavailableError, from_server_error

logger = logging.getLogger("pytriton.tritonserver")

T = TypeVar("T")


def to_triton_error(exc: BaseException) -> BaseException:
    """The in-process API's exception for what the core raised (others are left as they are)."""
    if isinstance(exc, ServerError):
        return from_server_error(exc)
    return exc


class ServerRuntime:
    """An `app.Server` on its own event loop thread; `call` runs a coroutine there and waits for its result."""

    def __init__(self, config: ServerConfig, on_stopped: Callable[[], None] | None = None):
        self.config = config
        self.process = ComposedServer(config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="tritonserver-loop", daemon=True)
        self._on_stopped = on_stopped
        self._lock = threading.Lock()
        self.stopped = False

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def core(self) -> Any:
        """The running server's `ServerCore` (None once stopped)."""
        return self.process.core

    def start(self) -> None:
        self.thread.start()
        try:
            self.call(self.process.start())
        except BaseException:
            self._close_loop()  # (stop() does nothing after this: what it would end with is done here)
            if self._on_stopped is not None:
                self._on_stopped()
            raise

    def call(self, awaitable: Awaitable[T], timeout: float | None = None) -> T:
        """Run `awaitable` on the server's loop and return its result; core errors raised as TritonErrors."""
        if self.stopped or self.loop.is_closed():
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise UnavailableError("Server not started")
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise UnavailableError("timed out waiting for the server") from None
        except ServerError as exc:
            raise from_server_error(exc) from None

    def run(self, function: Callable[..., T], *args: Any) -> T:
        """Run a plain function on the server's loop (the core is not thread-safe) and return its result."""

        async def call() -> T:
            return function(*args)

        return self.call(call())

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> bool:
        """Schedule `callback` on the loop from any thread; False once the loop is closed."""
        try:
            self.loop.call_soon_threadsafe(callback, *args)
            return True
        except RuntimeError:  # the loop is closed: the server is gone, and with it what callback would free
            return False

    def stop(self) -> None:
        """Stop the server (bounded by its exit timeout) and the loop thread. Idempotent."""
        with self._lock:
            if self.stopped:
                return
            self.stopped = True
        try:
            if self.thread.is_alive():
                future = asyncio.run_coroutine_threadsafe(self.process.stop(), self.loop)
                try:
                    future.result(self.config.exit_timeout_s + STOP_OVERRUN_S + 5.0)
                except concurrent.futures.TimeoutError:
                    logger.error("the server did not stop within its exit timeout")
                except (ServerError, TritonError) as exc:
                    logger.error("stopping the server: %s", exc)
        finally:
            self._close_loop()
            if self._on_stopped is not None:
                self._on_stopped()

    def _close_loop(self) -> None:
        self.stopped = True
        if self.thread.is_alive():
            asyncio.run_coroutine_threadsafe(_cancel_tasks(), self.loop).result(10.0)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
        if not self.loop.is_closed():
            self.loop.close()


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


async def _cancel_tasks() -> None:
    """Cancel what still runs on the loop (requests nobody waits for any more) and let it end."""
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def stop_at_exit(owner: object, runtime: ServerRuntime) -> weakref.finalize[..., object]:
    """Stop `runtime` when `owner` is garbage collected or at interpreter exit, whichever comes first."""
    return weakref.finalize(owner, runtime.stop)


__all__ = ["ServerRuntime", "stop_at_exit", "to_triton_error"]
