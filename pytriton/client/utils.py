"""Helpers shared by the clients: url parsing, server/model readiness, model configuration.

The functions here take a `tritonclient.http.InferenceServerClient` or a
`tritonclient.grpc.InferenceServerClient`; `pytriton.client.asyncio_utils` has the same for the `.aio`
clients.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import time
import urllib.parse
from typing import Any

import tritonclient.grpc
import tritonclient.http
from tritonclient.utils import InferenceServerException

from pytriton.client.exceptions import (
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientInvalidUrlError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
)
from pytriton.model_config.triton_model_config import TritonModelConfig

_LOGGER = logging.getLogger(__name__)

DEFAULT_HTTP_PORT = 8000
DEFAULT_GRPC_PORT = 8001
_DEFAULT_PORTS = {"http": DEFAULT_HTTP_PORT, "grpc": DEFAULT_GRPC_PORT}

_DEFAULT_NETWORK_TIMEOUT_S = 60.0
_DEFAULT_WAIT_FOR_SERVER_READY_TIMEOUT_S = 60.0
_DEFAULT_WAIT_FOR_MODEL_READY_TIMEOUT_S = 300.0
_POLL_INTERVAL_MIN_S = 0.05
_POLL_INTERVAL_MAX_S = 1.0

Headers = dict[str, str | int | bool] | None
SyncClient = tritonclient.http.InferenceServerClient | tritonclient.grpc.InferenceServerClient


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


class ModelState(enum.Enum):
    """A model's state as the server's repository index reports it."""

    LOADING = "LOADING"
    UNLOADING = "UNLOADING"
    UNAVAILABLE = "UNAVAILABLE"
    READY = "READY"


# ---- error handling shared by the clients ------------------------------------------------------------


def _error_message(exc: BaseException) -> str:
    if isinstance(exc, InferenceServerException):
        return exc.message() or str(exc)
    details = getattr(exc, "details", None)  # grpc.RpcError (e.g. grpc.aio.AioRpcError)
    if callable(details):
        with contextlib.suppress(Exception):
            return details() or str(exc)
    return str(exc) or type(exc).__name__


def _is_restricted_error(exc: BaseException) -> bool:
    """The server refused the call for a missing or wrong access token."""
    message = _error_message(exc)
    return "is restricted, expecting header" in message


def _is_unimplemented_error(exc: BaseException) -> bool:
    text = _error_message(exc).lower()
    status = exc.status() if isinstance(exc, InferenceServerException) else ""
    return "UNIMPLEMENTED" in (status or "") or "not implemented" in text


def _is_deadline_error(exc: BaseException) -> bool:
    if isinstance(exc, InferenceServerException):
        status = exc.status() or ""
        if "DEADLINE_EXCEEDED" in status:
            return True
        return "Deadline Exceeded" in (exc.message() or "")
    code = getattr(exc, "code", None)  # grpc.RpcError
    if callable(code):
        try:
            return "DEADLINE_EXCEEDED" in str(code())
        except Exception:  # noqa: BLE001
            return False
    return False


def _is_unknown_model_error(exc: BaseException) -> bool:
    message = _error_message(exc).lower()
    return "unknown model" in message


def convert_server_error(exc: BaseException, action: str) -> PyTritonClientError:
    """Map an error of a tritonclient call to the PyTritonClient exception it means."""
    if isinstance(exc, PyTritonClientError):
        return exc
    message = _error_message(exc)
    if _is_deadline_error(exc) or isinstance(exc, TimeoutError):
        return PyTritonClientTimeoutError(f"Timeout occurred during {action}: {message}")
    if _is_unknown_model_error(exc):
        return PyTritonClientModelUnavailableError(f"Model is unavailable: {message}")
    return PyTritonClientInferenceServerError(f"Error occurred during {action}. Message: {message}")


def _is_grpc(client: Any) -> bool:
    return isinstance(client, (tritonclient.grpc.InferenceServerClient, tritonclient.grpc.aio.InferenceServerClient))


def _http_refusal(client: Any, request_uri: str, headers: Headers) -> PyTritonClientError | None:
    """Why an HTTP health endpoint answered "not ready" when the server refused the call (401/403).

    tritonclient.http's is_server_ready / is_model_ready turn any non-200 answer into False, hiding a
    missing access token; this asks again and reads the error.
    """
    if not isinstance(client, tritonclient.http.InferenceServerClient):
        return None
    try:
        from tritonclient.http._utils import _get_error

        response = client._get(request_uri=request_uri, headers=_headers(headers), query_params=None)
        if response.status_code in (401, 403):
            error = _get_error(response)
            if error is not None:
                return convert_server_error(error, "checking readiness")
    except Exception:  # noqa: BLE001 - best effort only
        return None
    return None


def _model_ready_uri(model_name: str, model_version: str | int | None) -> str:
    name = urllib.parse.quote(model_name)
    if model_version in (None, ""):
        return f"v2/models/{name}/ready"
    return f"v2/models/{name}/versions/{model_version}/ready"


def _version(model_version: str | int | None) -> str:
    return "" if model_version is None else str(model_version)


def _headers(headers: Headers) -> dict[str, str] | None:
    if not headers:
        return None
    return {str(k): str(v) for k, v in headers.items()}


def _call_kwargs(client: Any, headers: Headers, timeout_s: float | None) -> dict[str, Any]:
    """Keyword arguments for a non-infer call: headers, and for gRPC a per-call deadline."""
    kwargs: dict[str, Any] = {"headers": _headers(headers)}
    if _is_grpc(client) and timeout_s is not None:
        kwargs["client_timeout"] = max(min(timeout_s, _DEFAULT_NETWORK_TIMEOUT_S), 0.001)
    return kwargs


def _model_desc(model_name: str, model_version: str | int | None) -> str:
    return model_name if model_version in (None, "") else f"{model_name}/{model_version}"


def _parse_repository_index(client: Any, index: Any) -> list:
    if _is_grpc(client):
        return list((index or {}).get("models", []))
    return list(index or [])


def _index_entry_matches(entry: dict, model_name: str, model_version: str | int | None) -> bool:
    if entry.get("name") != model_name:
        return False
    return model_version in (None, "") or str(entry.get("version", "")) == str(model_version)


def _state_from_index(entries: list, model_name: str, model_version: str | int | None) -> ModelState:
    wanted = [e for e in entries if _index_entry_matches(e, model_name, model_version)]
    states = {e.get("state") or "UNAVAILABLE" for e in wanted}
    for state in (ModelState.READY, ModelState.LOADING, ModelState.UNLOADING):
        if state.value in states:
            return state
    return ModelState.UNAVAILABLE


class _Deadline:
    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.end = time.monotonic() + timeout_s

    @property
    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.end


def _next_interval(interval: float) -> float:
    return min(interval * 2, _POLL_INTERVAL_MAX_S)


# ---- sync helpers -------------------------------------------------------------------------------------


def create_client_from_url(url: str, network_timeout_s: float | None = None) -> SyncClient:
    """A tritonclient (http or grpc, after the url's scheme) for `url`.

    For HTTP `network_timeout_s` (default 60 s) bounds every request and the connection; tritonclient's
    gRPC client takes deadlines per call instead, which the pytriton clients pass.
    """
    triton_url = TritonUrl.from_url(url)
    timeout_s = _DEFAULT_NETWORK_TIMEOUT_S if network_timeout_s is None else network_timeout_s
    if triton_url.scheme == "grpc":
        return tritonclient.grpc.InferenceServerClient(triton_url.without_scheme)
    return tritonclient.http.InferenceServerClient(
        triton_url.without_scheme, connection_timeout=timeout_s, network_timeout=timeout_s
    )


def get_model_state(
    client: SyncClient,
    model_name: str,
    model_version: str | None = None,
    headers: Headers = None,
    timeout_s: float | None = None,
) -> ModelState:
    """The model's state from the server's repository index (UNAVAILABLE when the model is not listed).

    The repository index is in the `model-repository` endpoint group, which servers often restrict: pass
    the access-token headers (see `pytriton.client.auth`).
    """
    try:
        index = client.get_model_repository_index(
            **_call_kwargs(client, headers, timeout_s), **({"as_json": True} if _is_grpc(client) else {})
        )
    except Exception as exc:
        if not _is_unimplemented_error(exc):
            raise convert_server_error(exc, "obtaining the model repository index") from exc
        # a server without the repository API: a model is READY or UNAVAILABLE
        try:
            kwargs = _call_kwargs(client, headers, timeout_s)
            ready = client.is_model_ready(model_name, _version(model_version), **kwargs)
        except Exception as ready_exc:
            if _is_unknown_model_error(ready_exc):
                return ModelState.UNAVAILABLE
            raise convert_server_error(ready_exc, "checking model readiness") from ready_exc
        return ModelState.READY if ready else ModelState.UNAVAILABLE
    return _state_from_index(_parse_repository_index(client, index), model_name, model_version)


def _model_known(client: SyncClient, model_name: str, model_version: str | None, headers: Headers) -> bool:
    """Best effort: is the model known to the server at all (listed, or has metadata)?"""
    try:
        index = client.get_model_repository_index(
            **_call_kwargs(client, headers, 5.0), **({"as_json": True} if _is_grpc(client) else {})
        )
        entries = _parse_repository_index(client, index)
        return any(_index_entry_matches(e, model_name, model_version) for e in entries)
    except Exception as exc:  # noqa: BLE001 - restricted or unsupported: ask for the metadata instead
        _LOGGER.debug("repository index unavailable: %s", exc)
    try:
        client.get_model_metadata(model_name, _version(model_version), **_call_kwargs(client, headers, 5.0))
        return True
    except Exception as exc:  # noqa: BLE001
        return not _is_unknown_model_error(exc)


def wait_for_server_ready(client: SyncClient, timeout_s: float | None = None, headers: Headers = None) -> None:
    """Poll until the server is live and ready (default timeout 60 s).

    Raises:
        PyTritonClientTimeoutError: the server was not ready in time.
        PyTritonClientInferenceServerError: the server refused the health check (missing access token).
    """
    deadline = _Deadline(_DEFAULT_WAIT_FOR_SERVER_READY_TIMEOUT_S if timeout_s is None else timeout_s)
    interval = _POLL_INTERVAL_MIN_S
    last = "server is not ready"
    while True:
        try:
            kwargs = _call_kwargs(client, headers, max(deadline.remaining, 0.1))
            if client.is_server_live(**kwargs) and client.is_server_ready(**kwargs):
                return
            last = "server is not ready"
            refusal = _http_refusal(client, "v2/health/ready", headers)
            if refusal is not None:
                raise refusal
        except PyTritonClientError:
            raise
        except InferenceServerException as exc:
            if _is_restricted_error(exc):
                raise convert_server_error(exc, "checking server readiness") from exc
            last = _error_message(exc)
        except Exception as exc:  # noqa: BLE001 - connection refused and the like: keep polling
            last = _error_message(exc)
        if deadline.expired:
            raise PyTritonClientTimeoutError(
                f"Waiting for the server to be ready timed out after {deadline.timeout_s} s ({last})."
            )
        time.sleep(min(interval, deadline.remaining))
        interval = _next_interval(interval)


def wait_for_model_ready(
    client: SyncClient,
    model_name: str,
    model_version: str | None = None,
    timeout_s: float | None = None,
    headers: Headers = None,
) -> None:
    """Poll until the server and the model are ready (default timeout 300 s).

    Raises:
        PyTritonClientModelUnavailableError: the time ran out and the server does not know the model.
        PyTritonClientTimeoutError: the time ran out otherwise.
        PyTritonClientInferenceServerError: the server refused the readiness check (missing access token).
    """
    deadline = _Deadline(_DEFAULT_WAIT_FOR_MODEL_READY_TIMEOUT_S if timeout_s is None else timeout_s)
    wait_for_server_ready(client, timeout_s=deadline.remaining, headers=headers)
    desc = _model_desc(model_name, model_version)
    interval = _POLL_INTERVAL_MIN_S
    last = "model is not ready"
    while True:
        try:
            kwargs = _call_kwargs(client, headers, max(deadline.remaining, 0.1))
            if client.is_model_ready(model_name, _version(model_version), **kwargs):
                return
            last = "model is not ready"
            refusal = _http_refusal(client, _model_ready_uri(model_name, model_version), headers)
            if refusal is not None:
                raise refusal
        except PyTritonClientError:
            raise
        except InferenceServerException as exc:
            if _is_restricted_error(exc):
                raise convert_server_error(exc, "checking model readiness") from exc
            last = _error_message(exc)
        except Exception as exc:  # noqa: BLE001
            last = _error_message(exc)
        if deadline.expired:
            if not _model_known(client, model_name, model_version, headers):
                raise PyTritonClientModelUnavailableError(
                    f"Model {desc} is not available on the server (not found within {deadline.timeout_s} s)."
                )
            raise PyTritonClientTimeoutError(
                f"Waiting for model {desc} to be ready timed out after {deadline.timeout_s} s ({last})."
            )
        time.sleep(min(interval, deadline.remaining))
        interval = _next_interval(interval)


def _fetch_model_config(
    client: SyncClient,
    model_name: str,
    model_version: str | None = None,
    headers: Headers = None,
    timeout_s: float | None = None,
) -> TritonModelConfig:
    try:
        if _is_grpc(client):
            response = client.get_model_config(
                model_name, _version(model_version), as_json=True, **_call_kwargs(client, headers, timeout_s)
            )
            config = response["config"]
        else:
            config = client.get_model_config(model_name, _version(model_version), **_call_kwargs(client, headers, None))
    except Exception as exc:
        raise convert_server_error(exc, f"obtaining the configuration of model {model_name}") from exc
    return TritonModelConfig.from_triton_dict(config)


def get_model_config(
    client: SyncClient,
    model_name: str,
    model_version: str | None = None,
    timeout_s: float | None = None,
    headers: Headers = None,
) -> TritonModelConfig:
    """Wait for the model to be ready (default 300 s), then return its configuration."""
    deadline = _Deadline(_DEFAULT_WAIT_FOR_MODEL_READY_TIMEOUT_S if timeout_s is None else timeout_s)
    wait_for_model_ready(client, model_name, model_version, timeout_s=deadline.remaining, headers=headers)
    return _fetch_model_config(client, model_name, model_version, headers, max(deadline.remaining, 1.0))
