"""What the three front-ends share: a pytriton network service (gRPC, HTTP or metrics listener) started on an
in-process `tritonserver.Server`'s event loop, serving that server's core.

A started front-end is attached to the server (`app.Server.attached`): `Server.stop()` drains the requests it has
in flight with the in-process ones and closes it, so no port outlives its server. `stop()` closes it at once, as
Triton's does: calls in progress on its connections are cut (the in-process requests go on).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar

from pytriton.config.tls import TlsError
from pytriton.server.composition import Server as ComposedServer
from pytriton.tritonfrontend._options import Rule, check, warn_inert
from pytriton import tritonserver
from pytriton.tritonserver import AlreadyExistsError, InvalidArgumentError, UnavailableError
from pytriton.tritonserver._runtime import ServerRuntime


class Frontend:
    """Base of KServeHttp, KServeGrpc and Metrics: `start()`, `stop()`, a context manager."""

    Options: ClassVar[type]
    _protocol: ClassVar[str] = "HTTP"  # in Triton's messages: "HTTP server is already running."
    _rules: ClassVar[dict[str, Rule]] = {}
    _inert: ClassVar[dict[str, str]] = {}  # accepted fields without effect here, and why
    # Triton 2.51's spelling, `KServeHttp.Server(server, options)`, that 2.52 dropped and 2.52's OpenAI frontend
    # still calls: the front-end class itself
    Server: ClassVar[type[Frontend]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.Server = cls

    def __init__(self, server: tritonserver.Server, options: Any = None) -> None:
        if options is None:
            options = self.Options()
        name = type(self).__name__
        if not isinstance(options, self.Options):
            raise InvalidArgumentError(
                f"Incorrect type for options. options argument must be of type {name}.Options")
        if not isinstance(server, tritonserver.Server):
            raise InvalidArgumentError(f"Incorrect type for server. server argument must be of type "
                                       f"tritonserver.Server, not {type(server).__name__}")
        server._started()  # InvalidArgumentError "Server not started": Triton needs the server's handle here too
        self._check_options(options)
        warn_inert(options, self._inert)
        self._server = server
        self._options: Any = dataclasses.replace(typing.cast(Any, options))
        self._service: Any = None  # the pytriton listener while started
        self._runtime: ServerRuntime | None = None

    @classmethod
    def _check_options(cls, options: Any) -> None:
        """Beyond the fields' types and ranges (checked when Options are made): what this front-end refuses."""

    @property
    def options(self) -> Any:
        return self._options

    @property
    def port(self) -> int | None:
        """The port listened on while started (the one the system chose for `port=0`); None when stopped."""
        return self._service.port if self._running() else None

    def _running(self) -> bool:
        runtime, service = self._runtime, self._service
        return service is not None and runtime is not None and not runtime.stopped and \
            service in runtime.process.attached

    # ---- life cycle --------------------------------------------------------------------------------
    def start(self) -> None:
        """Listen and serve; AlreadyExistsError when started, UnavailableError when the port is taken."""
        if self._running():
            raise AlreadyExistsError(f"{self._protocol} server is already running.")
        runtime = self._server._started()
        options: Any = self._options

        async def start() -> Any:
            process = runtime.process
            if process.core is None:
                raise UnavailableError("Server not ready")
            service = self._make(process, options)
            try:
                await service.start()
            except TlsError as exc:  # a certificate or key that cannot be used (the message names the file)
                raise InvalidArgumentError(str(exc)) from None
            except OSError:
                raise UnavailableError(f"Socket '{options.address}:{options.port}' already in use") from None
            await self._started(service)
            process.attached.append(service)
            return service

        self._service = runtime.call(start())
        self._runtime = runtime

    def stop(self) -> None:
        """Stop listening and close the connections; UnavailableError when not started. A front-end its server
        already stopped (with `Server.stop()`) stops without error."""
        runtime, service = self._runtime, self._service
        self._runtime = self._service = None
        if runtime is None or service is None:
            raise UnavailableError(f"{self._protocol} server is not running.")
        if runtime.stopped:
            return

        async def stop() -> None:
            attached = runtime.process.attached
            if service in attached:  # not yet stopped by its server
                attached.remove(service)
                await self._stop(service)

        runtime.call(stop())

    def __enter__(self) -> Frontend:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- the protocol's part -----------------------------------------------------------------------
    def _make(self, process: ComposedServer, options: Any) -> Any:
        raise NotImplementedError

    async def _started(self, service: Any) -> None:
        """After the listener started, before it counts as running (gRPC: health SERVING)."""

    async def _stop(self, service: Any) -> None:
        await service.stop()


def text(value: str) -> str | None:
    """An empty pattern option means none."""
    return value or None


__all__ = ["Frontend", "Rule", "check", "text"]
