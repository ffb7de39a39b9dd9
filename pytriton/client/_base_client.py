"""What every model client shares: url, model, timeouts, access token, request builder, start-up steps."""

from __future__ import annotations

import time
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from pytriton.client._readiness import DEFAULT_NETWORK_TIMEOUT_S, fetch_model_config_steps, model_ready_steps
from pytriton.client._request_builder import RequestBuilder
from pytriton.client._steps import Steps
from pytriton.client.auth import create_auth_headers, extract_access_token_from_headers
from pytriton.client.exceptions import PyTritonClientValueError
from pytriton.client.utils import TritonUrl
from pytriton.model_config.triton_model_config import TritonModelConfig

if TYPE_CHECKING:
    from typing_extensions import Self

DEFAULT_INFERENCE_TIMEOUT_S = 60.0
_DEFAULT_INIT_TIMEOUT_S = 300.0


class BaseModelClient:
    """What every model client shares: url, model, timeouts, access token, lazily fetched model config."""

    #: the client's name in "... is only supported for grpc protocol" for clients that stream (gRPC only)
    _grpc_only: ClassVar[str | None] = None

    def __init__(
        self,
        url: str,
        model_name: str,
        model_version: str | None = None,
        *,
        lazy_init: bool = True,
        init_timeout_s: float | None = None,
        inference_timeout_s: float | None = None,
        model_config: TritonModelConfig | None = None,
        ensure_model_is_ready: bool = True,
        access_token: str | None = None,
    ):
        """Client for `model_name` (optionally `model_version`) on the server at `url`.

        Args:
            url: `[scheme://]host[:port]`; scheme `http` (default) or `grpc`; default ports 8000 / 8001.
            model_name: name of the model.
            model_version: version of the model; None means the latest.
            lazy_init: wait for the model and read its configuration at the first request (True) or now.
            init_timeout_s: how long to wait for the server and model to be ready (default 300 s).
            inference_timeout_s: how long one inference may take (default 60 s).
            model_config: the model's configuration, if known (skips asking the server for it).
            ensure_model_is_ready: with `model_config` given, still wait for the model to be ready.
            access_token: token for servers that restrict endpoints; sent with every call.

        Raises:
            PyTritonClientInvalidUrlError: `url` is not valid.
            PyTritonClientTimeoutError: `lazy_init` is False and the model was not ready in time.
            PyTritonClientModelUnavailableError: `lazy_init` is False and the server lacks the model.
        """
        if self._grpc_only is not None and TritonUrl.from_url(url).scheme != "grpc":
            raise PyTritonClientValueError(f"{self._grpc_only} is only supported for grpc protocol")
        self._init_timeout_s = _DEFAULT_INIT_TIMEOUT_S if init_timeout_s is None else float(init_timeout_s)
        self._inference_timeout_s = (
            DEFAULT_INFERENCE_TIMEOUT_S if inference_timeout_s is None else float(inference_timeout_s)
        )
        self._network_timeout_s = min(DEFAULT_NETWORK_TIMEOUT_S, self._init_timeout_s)
        self._triton_url = TritonUrl.from_url(url)
        self._url = self._triton_url.with_scheme
        self._scheme = self._triton_url.scheme
        self._model_name = model_name
        self._model_version = model_version
        self._access_token = access_token
        self._auth_headers = create_auth_headers(access_token, self._scheme)
        self._model_config = model_config
        self._model_ready = model_config is not None and not ensure_model_is_ready
        self._lazy_init = lazy_init
        self._triton_client_lib = self.get_lib()
        self._request_builder = RequestBuilder(
            self._triton_client_lib, self._scheme, model_name, model_version, self._auth_headers
        )
        self._connect()

    @classmethod
    def from_existing_client(cls, existing_client: BaseModelClient) -> Self:
        """A new client of this class for the same server, model, timeouts and access token.

        The model configuration the existing client already has is reused (no readiness wait).
        """
        kwargs: dict[str, Any] = {}
        if getattr(existing_client, "_model_config", None) is not None:
            kwargs["model_config"] = existing_client._model_config
            kwargs["ensure_model_is_ready"] = False
        access_token = getattr(existing_client, "_access_token", None)
        if access_token is None:
            access_token = extract_access_token_from_headers(getattr(existing_client, "_auth_headers", None))
        return cls(
            existing_client._url,
            existing_client._model_name,
            existing_client._model_version,
            init_timeout_s=existing_client._init_timeout_s,
            inference_timeout_s=existing_client._inference_timeout_s,
            access_token=access_token,
            **kwargs,
        )

    def get_lib(self) -> ModuleType:
        """The tritonclient module used for this client's scheme."""
        raise NotImplementedError

    def _connect(self) -> None:
        """Make the connections (or get ready to make them at first use); the last step of `__init__`."""

    def _ensure_ready_steps(self, client: Any, timeout_s: float) -> Steps[TritonModelConfig]:
        """Wait for the model (unless known ready) and fetch its configuration (unless known); return it."""
        start = time.monotonic()
        if not self._model_ready:
            yield from model_ready_steps(client, self._model_name, self._model_version, timeout_s, self._auth_headers)
            self._model_ready = True
        if self._model_config is None:
            remaining = max(timeout_s - (time.monotonic() - start), 1.0)
            self._model_config = yield from fetch_model_config_steps(
                client, self._model_name, self._model_version, self._auth_headers, remaining
            )
        return self._model_config
