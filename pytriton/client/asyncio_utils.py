"""Asyncio counterparts of `pytriton.client.utils` for `tritonclient.http.aio` / `tritonclient.grpc.aio`."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import tritonclient.grpc.aio
import tritonclient.http.aio
from tritonclient.utils import InferenceServerException

from pytriton.client.exceptions import (
    PyTritonClientError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
)
from pytriton.client.utils import (
    _DEFAULT_NETWORK_TIMEOUT_S,
    _DEFAULT_WAIT_FOR_MODEL_READY_TIMEOUT_S,
    _DEFAULT_WAIT_FOR_SERVER_READY_TIMEOUT_S,
    _POLL_INTERVAL_MIN_S,
    Headers,
    ModelState,
    TritonUrl,
    _call_kwargs,
    _Deadline,
    _error_message,
    _headers,
    _index_entry_matches,
    _is_grpc,
    _is_restricted_error,
    _is_unimplemented_error,
    _is_unknown_model_error,
    _model_desc,
    _model_ready_uri,
    _next_interval,
    _parse_repository_index,
    _state_from_index,
    _version,
    convert_server_error,
)
from pytriton.model_config.triton_model_config import TritonModelConfig

_LOGGER = logging.getLogger(__name__)

AsyncClient = tritonclient.http.aio.InferenceServerClient | tritonclient.grpc.aio.InferenceServerClient


def create_client_from_url(url: str, network_timeout_s: float | None = None) -> AsyncClient:
    """An asyncio tritonclient for `url`; must be called with an event loop running (aiohttp needs one).

    For HTTP `network_timeout_s` (default 60 s) bounds every request.
    """
    triton_url = TritonUrl.from_url(url)
    timeout_s = _DEFAULT_NETWORK_TIMEOUT_S if network_timeout_s is None else network_timeout_s
    if triton_url.scheme == "grpc":
        return tritonclient.grpc.aio.InferenceServerClient(triton_url.without_scheme)
    return tritonclient.http.aio.InferenceServerClient(triton_url.without_scheme, conn_timeout=timeout_s)


async def _with_timeout(coro: Any, timeout_s: float | None) -> Any:
    if timeout_s is None:
        return await coro
    return await asyncio.wait_for(coro, timeout_s)


async def _asyncio_http_refusal(client: Any, request_uri: str, headers: Headers) -> PyTritonClientError | None:
    """Why an HTTP health endpoint answered "not ready" when the server refused the call (401/403)."""
    if not isinstance(client, tritonclient.http.aio.InferenceServerClient):
        return None
    try:
        from tritonclient.http.aio import _get_error

        response = await client._get(request_uri=request_uri, headers=_headers(headers), query_params=None)
        if response.status in (401, 403):
            error = await _get_error(response)
            if error is not None:
                return convert_server_error(error, "checking readiness")
    except Exception:  # noqa: BLE001 - best effort only
        return None
    return None


async def asyncio_get_model_state(
    client: AsyncClient,
    model_name: str,
    model_version: str | None = None,
    headers: Headers = None,
    timeout_s: float | None = None,
) -> ModelState:
    """The model's state from the server's repository index (UNAVAILABLE when the model is not listed)."""
    try:
        index = await _with_timeout(
            client.get_model_repository_index(
                **_call_kwargs(client, headers, timeout_s), **({"as_json": True} if _is_grpc(client) else {})
            ),
            timeout_s,
        )
    except Exception as exc:
        if not _is_unimplemented_error(exc):
            raise convert_server_error(exc, "obtaining the model repository index") from exc
        try:
            ready = await _with_timeout(
                client.is_model_ready(model_name, _version(model_version), **_call_kwargs(client, headers, timeout_s)),
                timeout_s,
            )
        except Exception as ready_exc:
            if _is_unknown_model_error(ready_exc):
                return ModelState.UNAVAILABLE
            raise convert_server_error(ready_exc, "checking model readiness") from ready_exc
        return ModelState.READY if ready else ModelState.UNAVAILABLE
    return _state_from_index(_parse_repository_index(client, index), model_name, model_version)


async def _asyncio_model_known(
    client: AsyncClient, model_name: str, model_version: str | None, headers: Headers
) -> bool:
    try:
        index = await _with_timeout(
            client.get_model_repository_index(
                **_call_kwargs(client, headers, 5.0), **({"as_json": True} if _is_grpc(client) else {})
            ),
            5.0,
        )
        entries = _parse_repository_index(client, index)
        return any(_index_entry_matches(e, model_name, model_version) for e in entries)
    except Exception as exc:  # noqa: BLE001 - restricted or unsupported: ask for the metadata instead
        _LOGGER.debug("repository index unavailable: %s", exc)
    try:
        await _with_timeout(
            client.get_model_metadata(model_name, _version(model_version), **_call_kwargs(client, headers, 5.0)), 5.0
        )
        return True
    except Exception as exc:  # noqa: BLE001
        return not _is_unknown_model_error(exc)


async def asyncio_wait_for_server_ready(
    client: AsyncClient, timeout_s: float | None = None, headers: Headers = None
) -> None:
    """Poll until the server is live and ready (default timeout 60 s)."""
    deadline = _Deadline(_DEFAULT_WAIT_FOR_SERVER_READY_TIMEOUT_S if timeout_s is None else timeout_s)
    interval = _POLL_INTERVAL_MIN_S
    last = "server is not ready"
    while True:
        try:
            per_call = max(deadline.remaining, 0.1)
            kwargs = _call_kwargs(client, headers, per_call)
            live = await _with_timeout(client.is_server_live(**kwargs), per_call)
            if live and await _with_timeout(client.is_server_ready(**kwargs), per_call):
                return
            last = "server is not ready"
            refusal = await _asyncio_http_refusal(client, "v2/health/ready", headers)
            if refusal is not None:
                raise refusal
        except PyTritonClientError:
            raise
        except InferenceServerException as exc:
            if _is_restricted_error(exc):
                raise convert_server_error(exc, "checking server readiness") from exc
            last = _error_message(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            last = _error_message(exc)
        if deadline.expired:
            raise PyTritonClientTimeoutError(
                f"Waiting for the server to be ready timed out after {deadline.timeout_s} s ({last})."
            )
        await asyncio.sleep(min(interval, deadline.remaining))
        interval = _next_interval(interval)


async def asyncio_wait_for_model_ready(
    client: AsyncClient,
    model_name: str,
    model_version: str | None = None,
    timeout_s: float | None = None,
    headers: Headers = None,
) -> None:
    """Poll until the server and the model are ready (default timeout 300 s)."""
    deadline = _Deadline(_DEFAULT_WAIT_FOR_MODEL_READY_TIMEOUT_S if timeout_s is None else timeout_s)
    await asyncio_wait_for_server_ready(client, timeout_s=deadline.remaining, headers=headers)
    desc = _model_desc(model_name, model_version)
    interval = _POLL_INTERVAL_MIN_S
    last = "model is not ready"
    while True:
        try:
            per_call = max(deadline.remaining, 0.1)
            ready = await _with_timeout(
                client.is_model_ready(model_name, _version(model_version), **_call_kwargs(client, headers, per_call)),
                per_call,
            )
            if ready:
                return
            last = "model is not ready"
            refusal = await _asyncio_http_refusal(client, _model_ready_uri(model_name, model_version), headers)
            if refusal is not None:
                raise refusal
        except PyTritonClientError:
            raise
        except InferenceServerException as exc:
            if _is_restricted_error(exc):
                raise convert_server_error(exc, "checking model readiness") from exc
            last = _error_message(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            last = _error_message(exc)
        if deadline.expired:
            if not await _asyncio_model_known(client, model_name, model_version, headers):
                raise PyTritonClientModelUnavailableError(
                    f"Model {desc} is not available on the server (not found within {deadline.timeout_s} s)."
                )
            raise PyTritonClientTimeoutError(
                f"Waiting for model {desc} to be ready timed out after {deadline.timeout_s} s ({last})."
            )
        await asyncio.sleep(min(interval, deadline.remaining))
        interval = _next_interval(interval)


async def _asyncio_fetch_model_config(
    client: AsyncClient,
    model_name: str,
    model_version: str | None = None,
    headers: Headers = None,
    timeout_s: float | None = None,
) -> TritonModelConfig:
    try:
        if _is_grpc(client):
            response = await _with_timeout(
                client.get_model_config(
                    model_name, _version(model_version), as_json=True, **_call_kwargs(client, headers, timeout_s)
                ),
                timeout_s,
            )
            config = response["config"]
        else:
            config = await _with_timeout(
                client.get_model_config(model_name, _version(model_version), **_call_kwargs(client, headers, None)),
                timeout_s,
            )
    except Exception as exc:
        raise convert_server_error(exc, f"obtaining the configuration of model {model_name}") from exc
    return TritonModelConfig.from_triton_dict(config)


async def asyncio_get_model_config(
    client: AsyncClient,
    model_name: str,
    model_version: str | None = None,
    timeout_s: float | None = None,
    headers: Headers = None,
) -> TritonModelConfig:
    """Wait for the model to be ready (default 300 s), then return its configuration."""
    deadline = _Deadline(_DEFAULT_WAIT_FOR_MODEL_READY_TIMEOUT_S if timeout_s is None else timeout_s)
    await asyncio_wait_for_model_ready(client, model_name, model_version, timeout_s=deadline.remaining, headers=headers)
    return await _asyncio_fetch_model_config(client, model_name, model_version, headers, max(deadline.remaining, 1.0))
