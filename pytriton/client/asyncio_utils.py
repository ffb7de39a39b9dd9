"""Asyncio counterparts of `pytriton.client.utils` for `tritonclient.http.aio` / `tritonclient.grpc.aio`."""

from __future__ import annotations

from typing import TypeAlias

import tritonclient.grpc.aio
import tritonclient.http.aio

from pytriton.client import _readiness
from pytriton.client._readiness import Headers, ModelState
from pytriton.client._steps import run_asyncio
from pytriton.client.utils import TritonUrl
from pytriton.model_config.triton_model_config import TritonModelConfig

__all__ = [
    "AsyncClient",
    "asyncio_get_model_config",
    "asyncio_get_model_state",
    "asyncio_wait_for_model_ready",
    "asyncio_wait_for_server_ready",
    "create_client_from_url",
]

AsyncClient: TypeAlias = tritonclient.http.aio.InferenceServerClient | tritonclient.grpc.aio.InferenceServerClient


def create_client_from_url(url: str, network_timeout_s: float | None = None) -> AsyncClient:
    """An asyncio tritonclient for `url`; must be called with an event loop running (aiohttp needs one).

    For HTTP `network_timeout_s` (default 60 s) bounds every request.
    """
    triton_url = TritonUrl.from_url(url)
    timeout_s = _readiness.DEFAULT_NETWORK_TIMEOUT_S if network_timeout_s is None else network_timeout_s
    if triton_url.scheme == "grpc":
        return tritonclient.grpc.aio.InferenceServerClient(triton_url.without_scheme)
    return tritonclient.http.aio.InferenceServerClient(triton_url.without_scheme, conn_timeout=timeout_s)


async def asyncio_get_model_state(
    client: AsyncClient, model_name: str, model_version: str | None = None, headers: Headers = None,
    timeout_s: float | None = None,
) -> ModelState:
    """The model's state from the server's repository index (UNAVAILABLE when the model is not listed)."""
    return await run_asyncio(_readiness.model_state_steps(client, model_name, model_version, headers, timeout_s))


async def asyncio_wait_for_server_ready(
    client: AsyncClient, timeout_s: float | None = None, headers: Headers = None
) -> None:
    """Poll until the server is live and ready (default timeout 60 s)."""
    await run_asyncio(_readiness.server_ready_steps(client, timeout_s, headers))


async def asyncio_wait_for_model_ready(
    client: AsyncClient, model_name: str, model_version: str | None = None, timeout_s: float | None = None,
    headers: Headers = None,
) -> None:
    """Poll until the server and the model are ready (default timeout 300 s)."""
    await run_asyncio(_readiness.model_ready_steps(client, model_name, model_version, timeout_s, headers))


async def asyncio_get_model_config(
    client: AsyncClient, model_name: str, model_version: str | None = None, timeout_s: float | None = None,
    headers: Headers = None,
) -> TritonModelConfig:
    """Wait for the model to be ready (default 300 s), then return its configuration."""
    return await run_asyncio(_readiness.model_config_steps(client, model_name, model_version, timeout_s, headers))
