"""Helpers shared by the clients: url parsing, server/model readiness, model configuration.

The functions here take a `tritonclient.http.InferenceServerClient` or a
`tritonclient.grpc.InferenceServerClient`; `pytriton.client.asyncio_utils` has the same for the `.aio`
clients (both run the steps of `pytriton.client._readiness`).
"""

from __future__ import annotations

import dataclasses
import logging
import urllib.parse
from typing import TypeAlias

import tritonclient.grpc
import tritonclient.http

from pytriton.client._errors import convert_server_error
from pytriton.client._readiness import (
    DEFAULT_NETWORK_TIMEOUT_S,
    Headers,
    ModelState,
    model_config_steps,
    model_ready_steps,
    model_state_steps,
    server_ready_steps,
)
from pytriton.client._steps import run_blocking
from pytriton.client.exceptions import PyTritonClientInvalidUrlError
from pytriton.model_config.triton_model_config import TritonModelConfig

__all__ = [
    "DEFAULT_GRPC_PORT",
    "DEFAULT_HTTP_PORT",
    "Headers",
    "ModelState",
    "SyncClient",
    "TritonUrl",
    "convert_server_error",
    "create_client_from_url",
    "get_model_config",
    "get_model_state",
    "wait_for_model_ready",
    "wait_for_server_ready",
]

_LOGGER = logging.getLogger("pytriton.client")

DEFAULT_HTTP_PORT = 8000
DEFAULT_GRPC_PORT = 8001
_DEFAULT_PORTS = {"http": DEFAULT_HTTP_PORT, "grpc": DEFAULT_GRPC_PORT}

SyncClient: TypeAlias = tritonclient.http.InferenceServerClient | tritonclient.grpc.InferenceServerClient


@dataclasses.dataclass(frozen=True)
class TritonUrl:
    """A parsed server url: `[scheme://]host[:port]` with scheme `http` (default) or `grpc`."""

    scheme: str
    hostname: str
    port: int

    @classmethod
    def from_url(cls, url: str) -> TritonUrl:
        """Parse `url`; a missing scheme means http, a missing port the scheme's default (8000 / 8001).

        Raises:
            PyTritonClientInvalidUrlError: the url is not a string, has no host, a bad port or another scheme.
        """
        if not isinstance(url, str):
            raise PyTritonClientInvalidUrlError(f"Invalid url {url!r}. Url must be a string.")
        text = url.strip()
        if "://" in text:
            scheme, rest = text.split("://", 1)
            scheme = scheme.lower()
        else:
            scheme, rest = "http", text
        if scheme not in _DEFAULT_PORTS:
            raise PyTritonClientInvalidUrlError(
                f"Invalid url {url!r}: unsupported scheme {scheme!r}. Only grpc and http are supported."
            )
        try:
            parsed = urllib.parse.urlsplit(f"{scheme}://{rest}")
            hostname = parsed.hostname
            port = parsed.port
        except ValueError as exc:
            raise PyTritonClientInvalidUrlError(f"Invalid url {url!r}: {exc}") from exc
        if not hostname:
            raise PyTritonClientInvalidUrlError(f"Invalid url {url!r}: no host name.")
        if parsed.path not in ("", "/"):
            _LOGGER.debug("Ignoring the path %r of url %r", parsed.path, url)
        return cls(scheme=scheme, hostname=hostname, port=_DEFAULT_PORTS[scheme] if port is None else port)

    @property
    def with_scheme(self) -> str:
        """`scheme://host:port`."""
        return f"{self.scheme}://{self.without_scheme}"

    @property
    def without_scheme(self) -> str:
        """`host:port` (IPv6 hosts in brackets), as tritonclient expects it."""
        host = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return f"{host}:{self.port}"


def create_client_from_url(url: str, network_timeout_s: float | None = None) -> SyncClient:
    """A tritonclient (http or grpc, after the url's scheme) for `url`.

    For HTTP `network_timeout_s` (default 60 s) bounds every request and the connection; tritonclient's
    gRPC client takes deadlines per call instead, which the pytriton clients pass.
    """
    triton_url = TritonUrl.from_url(url)
    timeout_s = DEFAULT_NETWORK_TIMEOUT_S if network_timeout_s is None else network_timeout_s
    if triton_url.scheme == "grpc":
        return tritonclient.grpc.InferenceServerClient(triton_url.without_scheme)
    return tritonclient.http.InferenceServerClient(
        triton_url.without_scheme, connection_timeout=timeout_s, network_timeout=timeout_s
    )


def get_model_state(
    client: SyncClient, model_name: str, model_version: str | None = None, headers: Headers = None,
    timeout_s: float | None = None,
) -> ModelState:
    """The model's state from the server's repository index (UNAVAILABLE when the model is not listed).

    The repository index is in the `model-repository` endpoint group, which servers often restrict: pass
    the access-token headers (see `pytriton.client.auth`).
    """
    return run_blocking(model_state_steps(client, model_name, model_version, headers, timeout_s))


def wait_for_server_ready(client: SyncClient, timeout_s: float | None = None, headers: Headers = None) -> None:
    """Poll until the server is live and ready (default timeout 60 s).

    Raises:
        PyTritonClientTimeoutError: the server was not ready in time.
        PyTritonClientInferenceServerError: the server refused the health check (missing access token).
    """
    run_blocking(server_ready_steps(client, timeout_s, headers))


def wait_for_model_ready(
    client: SyncClient, model_name: str, model_version: str | None = None, timeout_s: float | None = None,
    headers: Headers = None,
) -> None:
    """Poll until the server and the model are ready (default timeout 300 s).

    Raises:
        PyTritonClientModelUnavailableError: the time ran out and the server does not know the model.
        PyTritonClientTimeoutError: the time ran out otherwise.
        PyTritonClientInferenceServerError: the server refused the readiness check (missing access token).
    """
    run_blocking(model_ready_steps(client, model_name, model_version, timeout_s, headers))


def get_model_config(
    client: SyncClient, model_name: str, model_version: str | None = None, timeout_s: float | None = None,
    headers: Headers = None,
) -> TritonModelConfig:
    """Wait for the model to be ready (default 300 s), then return its configuration."""
    return run_blocking(model_config_steps(client, model_name, model_version, timeout_s, headers))
