"""What the front-ends' repository extension (index, load, unload) calls: a model repository's controller when the
server serves one with model control, else the registry alone (every load and unload refused, as Triton does)."""

from __future__ import annotations

from typing import Protocol

from pytriton.config.repository_limits import RepositoryLimits
from pytriton.exceptions import ServerError, Status

# Triton's answer to a load or unload when the model control mode is not "explicit".
NO_EXPLICIT_CONTROL = "explicit model load / unload is not allowed if polling is enabled"


class RepositoryControl(Protocol):
    """The repository extension's operations; errors are ServerErrors with Triton's codes."""

    def index(self, ready_only: bool) -> list[dict[str, str]]:
        """One entry per model: name, and once it was loaded version, state and reason."""
        ...

    def unavailable(self) -> list[str]:
        """The models a load of which was tried and that are not READY now (failed, loading), except those
        unloaded on request: what Triton's strict readiness waits for."""
        ...

    async def load(self, name: str, parameters: dict[str, str | bytes]) -> None:
        """Load (or reload) `name`; parameters as the client sent them (`config`, `file:...`)."""
        ...

    async def unload(self, name: str, unload_dependents: bool) -> None:
        """Stop serving `name`."""
        ...

    def register(self, folder: str, name_mapping: dict[str, str] | None = None) -> None:
        """Serve the models of repository `folder` too (model folder -> name in `name_mapping`)."""
        ...

    def unregister(self, folder: str) -> None:
        """Stop offering the models of repository `folder`."""
        ...

    def max_request_bytes(self, http: bool) -> int:
        """The largest load request worth reading (`RepositoryLimits.max_request_bytes`; `http`: as an HTTP body)."""
        ...


def no_explicit_control() -> ServerError:
    return ServerError(Status.UNAVAILABLE, NO_EXPLICIT_CONTROL)


def request_bytes(control: RepositoryControl | None, http: bool) -> int:
    """The largest repository extension request the front-ends read: a controller's bound, else (every load refused)
    that of a load without files."""
    if control is None:
        return RepositoryLimits().max_request_bytes(uploads=False, http=http)
    return control.max_request_bytes(http)


__all__ = ["NO_EXPLICIT_CONTROL", "RepositoryControl", "no_explicit_control", "request_bytes"]
