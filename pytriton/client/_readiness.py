"""Server and model readiness, model state and model configuration, as steps (see `_steps`).

`pytriton.client.utils` runs these with blocking tritonclients, `pytriton.client.asyncio_utils` with the
`.aio` ones, and the model clients compose them into their own start-up.
"""

from __future__ import annotations

import enum
import logging
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import tritonclient.grpc
import tritonclient.grpc.aio
import tritonclient.http
import tritonclient.http.aio
from tritonclient.utils import InferenceServerException

from pytriton.client._errors import (
    convert_server_error,
    error_message,
    is_restricted_error,
    is_unimplemented_error,
    is_unknown_model_error,
)
from pytriton.client._steps import Pause, ServerCall, Steps
from pytriton.client.exceptions import (
    PyTritonClientError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
)
from pytriton.model_config.triton_model_config import TritonModelConfig

_LOGGER = logging.getLogger("pytriton.client")

DEFAULT_NETWORK_TIMEOUT_S = 60.0
DEFAULT_WAIT_FOR_SERVER_READY_TIMEOUT_S = 60.0
DEFAULT_WAIT_FOR_MODEL_READY_TIMEOUT_S = 300.0
_POLL_INTERVAL_MIN_S = 0.05
_POLL_INTERVAL_MAX_S = 1.0
_MODEL_KNOWN_TIMEOUT_S = 5.0

Headers = dict[str, str | int | bool] | None


class ModelState(enum.Enum):
    """A model's state as the server's repository index reports it."""

    LOADING = "LOADING"
    UNLOADING = "UNLOADING"
    UNAVAILABLE = "UNAVAILABLE"
    READY = "READY"


class Deadline:
    """A point in time `timeout_s` from now."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.end = time.monotonic() + timeout_s

    @property
    def remaining(self) -> float:
        """Seconds left (0 once passed)."""
        return max(0.0, self.end - time.monotonic())

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return time.monotonic() >= self.end


def version(model_version: str | int | None) -> str:
    """The version argument tritonclient expects ("" for the latest)."""
    return "" if model_version is None else str(model_version)


def header_dict(headers: Headers) -> dict[str, str] | None:
    """`headers` with string values, or None when there are none."""
    if not headers:
        return None
    return {str(k): str(v) for k, v in headers.items()}


def is_grpc(client: Any) -> bool:
    """Whether `client` is a gRPC tritonclient (blocking or asyncio)."""
    return isinstance(client, (tritonclient.grpc.InferenceServerClient, tritonclient.grpc.aio.InferenceServerClient))


def call_kwargs(client: Any, headers: Headers, timeout_s: float | None) -> dict[str, Any]:
    """Keyword arguments for a non-infer call: headers, and for gRPC a per-call deadline."""
    kwargs: dict[str, Any] = {"headers": header_dict(headers)}
    if is_grpc(client) and timeout_s is not None:
        kwargs["client_timeout"] = max(min(timeout_s, DEFAULT_NETWORK_TIMEOUT_S), 0.001)
    return kwargs


def _model_desc(model_name: str, model_version: str | int | None) -> str:
    return model_name if model_version in (None, "") else f"{model_name}/{model_version}"


def _model_ready_uri(model_name: str, model_version: str | int | None) -> str:
    name = urllib.parse.quote(model_name)
    if model_version in (None, ""):
        return f"v2/models/{name}/ready"
    return f"v2/models/{name}/versions/{model_version}/ready"


def _index_call(client: Any, headers: Headers, timeout_s: float | None) -> ServerCall:
    as_json = {"as_json": True} if is_grpc(client) else {}
    return ServerCall(
        client.get_model_repository_index, kwargs={**call_kwargs(client, headers, timeout_s), **as_json},
        timeout_s=timeout_s,
    )


def _parse_repository_index(client: Any, index: Any) -> list[Any]:
    if is_grpc(client):
        return list((index or {}).get("models", []))
    return list(index or [])


def _index_entry_matches(entry: dict[str, Any], model_name: str, model_version: str | int | None) -> bool:
    if entry.get("name") != model_name:
        return False
    return model_version in (None, "") or str(entry.get("version", "")) == str(model_version)


def _state_from_index(entries: list[Any], model_name: str, model_version: str | int | None) -> ModelState:
    wanted = [e for e in entries if _index_entry_matches(e, model_name, model_version)]
    states = {e.get("state") or "UNAVAILABLE" for e in wanted}
    for state in (ModelState.READY, ModelState.LOADING, ModelState.UNLOADING):
        if state.value in states:
            return state
    return ModelState.UNAVAILABLE


def http_refusal_steps(client: Any, request_uri: str, headers: Headers) -> Steps[PyTritonClientError | None]:
    """Why an HTTP health endpoint answered "not ready" when the server refused the call (401/403)."""
    if isinstance(client, tritonclient.http.InferenceServerClient):
        from tritonclient.http._utils import _get_error

        status_attribute = "status_code"
    elif isinstance(client, tritonclient.http.aio.InferenceServerClient):
        from tritonclient.http.aio import _get_error

        status_attribute = "status"
    else:
        return None
    try:
        response = yield ServerCall(
            client._get, kwargs={"request_uri": request_uri, "headers": header_dict(headers), "query_params": None}
        )
        if getattr(response, status_attribute) in (401, 403):
            error = yield ServerCall(_get_error, (response,))
            if error is not None:
                return convert_server_error(error, "checking readiness")
    except Exception:  # noqa: BLE001 - best effort only
        return None
    return None


def model_state_steps(
    client: Any, model_name: str, model_version: str | None, headers: Headers, timeout_s: float | None
) -> Steps[ModelState]:
    """The model's state from the repository index; without that API, READY or UNAVAILABLE from readiness."""
    try:
        index = yield _index_call(client, headers, timeout_s)
    except Exception as exc:
        if not is_unimplemented_error(exc):
            raise convert_server_error(exc, "obtaining the model repository index") from exc
        try:
            ready = yield ServerCall(
                client.is_model_ready, (model_name, version(model_version)), call_kwargs(client, headers, timeout_s),
                timeout_s,
            )
        except Exception as ready_exc:
            if is_unknown_model_error(ready_exc):
                return ModelState.UNAVAILABLE
            raise convert_server_error(ready_exc, "checking model readiness") from ready_exc
        return ModelState.READY if ready else ModelState.UNAVAILABLE
    return _state_from_index(_parse_repository_index(client, index), model_name, model_version)


def _model_known_steps(client: Any, model_name: str, model_version: str | None, headers: Headers) -> Steps[bool]:
    """Best effort: is the model known to the server at all (listed, or has metadata)?"""
    try:
        index = yield _index_call(client, headers, _MODEL_KNOWN_TIMEOUT_S)
        entries = _parse_repository_index(client, index)
        return any(_index_entry_matches(e, model_name, model_version) for e in entries)
    except Exception as exc:  # noqa: BLE001 - restricted or unsupported: ask for the metadata instead
        _LOGGER.debug("repository index unavailable: %s", exc)
    try:
        yield ServerCall(
            client.get_model_metadata, (model_name, version(model_version)),
            call_kwargs(client, headers, _MODEL_KNOWN_TIMEOUT_S), _MODEL_KNOWN_TIMEOUT_S,
        )
        return True
    except Exception as exc:  # noqa: BLE001
        return not is_unknown_model_error(exc)


Probe = Callable[[dict[str, Any], float], Steps[bool]]


def _poll_steps(
    client: Any, headers: Headers, deadline: Deadline, probe: Probe, refusal_uri: str, what: str
) -> Steps[str | None]:
    """Run `probe` until it answers true (then None) or the deadline passes (then why `what` was not ready).

    A refused call (missing or wrong access token) raises at once; connection errors are polled through.
    """
    interval = _POLL_INTERVAL_MIN_S
    last = f"{what} is not ready"
    while True:
        try:
            per_call = max(deadline.remaining, 0.1)
            if (yield from probe(call_kwargs(client, headers, per_call), per_call)):
                return None
            last = f"{what} is not ready"
            refusal = yield from http_refusal_steps(client, refusal_uri, headers)
            if refusal is not None:
                raise refusal
        except PyTritonClientError:
            raise
        except InferenceServerException as exc:
            if is_restricted_error(exc):
                raise convert_server_error(exc, f"checking {what} readiness") from exc
            last = error_message(exc)
        except Exception as exc:  # noqa: BLE001 - connection refused and the like: keep polling
            last = error_message(exc)
        if deadline.expired:
            return last
        yield Pause(min(interval, deadline.remaining))
        interval = min(interval * 2, _POLL_INTERVAL_MAX_S)


def server_ready_steps(client: Any, timeout_s: float | None, headers: Headers) -> Steps[None]:
    """Poll until the server is live and ready (default timeout 60 s)."""
    deadline = Deadline(DEFAULT_WAIT_FOR_SERVER_READY_TIMEOUT_S if timeout_s is None else timeout_s)

    def probe(kwargs: dict[str, Any], per_call: float) -> Steps[bool]:
        if not (yield ServerCall(client.is_server_live, kwargs=kwargs, timeout_s=per_call)):
            return False
        return bool((yield ServerCall(client.is_server_ready, kwargs=kwargs, timeout_s=per_call)))

    last = yield from _poll_steps(client, headers, deadline, probe, "v2/health/ready", "server")
    if last is not None:
        raise PyTritonClientTimeoutError(
            f"Waiting for the server to be ready timed out after {deadline.timeout_s} s ({last})."
        )


def model_ready_steps(
    client: Any, model_name: str, model_version: str | None, timeout_s: float | None, headers: Headers
) -> Steps[None]:
    """Poll until the server and the model are ready (default timeout 300 s)."""
    deadline = Deadline(DEFAULT_WAIT_FOR_MODEL_READY_TIMEOUT_S if timeout_s is None else timeout_s)
    yield from server_ready_steps(client, deadline.remaining, headers)

    def probe(kwargs: dict[str, Any], per_call: float) -> Steps[bool]:
        return bool((yield ServerCall(client.is_model_ready, (model_name, version(model_version)), kwargs, per_call)))

    refusal_uri = _model_ready_uri(model_name, model_version)
    last = yield from _poll_steps(client, headers, deadline, probe, refusal_uri, "model")
    if last is None:
        return
    desc = _model_desc(model_name, model_version)
    if not (yield from _model_known_steps(client, model_name, model_version, headers)):
        raise PyTritonClientModelUnavailableError(
            f"Model {desc} is not available on the server (not found within {deadline.timeout_s} s)."
        )
    raise PyTritonClientTimeoutError(
        f"Waiting for model {desc} to be ready timed out after {deadline.timeout_s} s ({last})."
    )


def fetch_model_config_steps(
    client: Any, model_name: str, model_version: str | None, headers: Headers, timeout_s: float | None
) -> Steps[TritonModelConfig]:
    """The model's configuration (no readiness wait)."""
    try:
        if is_grpc(client):
            kwargs = {"as_json": True, **call_kwargs(client, headers, timeout_s)}
            response = yield ServerCall(client.get_model_config, (model_name, version(model_version)), kwargs, timeout_s)
            config = response["config"]
        else:
            kwargs = call_kwargs(client, headers, None)
            config = yield ServerCall(client.get_model_config, (model_name, version(model_version)), kwargs, timeout_s)
    except Exception as exc:
        raise convert_server_error(exc, f"obtaining the configuration of model {model_name}") from exc
    return TritonModelConfig.from_triton_dict(config)


def model_config_steps(
    client: Any, model_name: str, model_version: str | None, timeout_s: float | None, headers: Headers
) -> Steps[TritonModelConfig]:
    """Wait for the model to be ready (default 300 s), then return its configuration."""
    deadline = Deadline(DEFAULT_WAIT_FOR_MODEL_READY_TIMEOUT_S if timeout_s is None else timeout_s)
    yield from model_ready_steps(client, model_name, model_version, deadline.remaining, headers)
    return (yield from fetch_model_config_steps(client, model_name, model_version, headers, max(deadline.remaining, 1.0)))
