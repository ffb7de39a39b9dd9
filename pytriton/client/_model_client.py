"""`ModelClient`: the synchronous client (tritonclient.http or tritonclient.grpc)."""

from __future__ import annotations

import contextlib
import logging
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import tritonclient.grpc
import tritonclient.http

from pytriton.client._base_client import BaseModelClient
from pytriton.client._errors import convert_server_error
from pytriton.client._request_builder import InferCall, ParamsOrHeaders, infer_timeout_error, result_to_dict
from pytriton.client._steps import run_blocking
from pytriton.client.exceptions import PyTritonClientClosedError
from pytriton.client.utils import create_client_from_url as _create_client_from_url
from pytriton.client.utils import wait_for_model_ready, wait_for_server_ready
from pytriton.model_config.triton_model_config import TritonModelConfig

if TYPE_CHECKING:
    from typing_extensions import Self

_LOGGER = logging.getLogger("pytriton.client")

_TIMEOUT_ERRORS: tuple[type[BaseException], ...] = (TimeoutError,)
try:  # geventhttpclient (tritonclient.http) reports a network timeout as gevent.Timeout, a BaseException
    import gevent

    _TIMEOUT_ERRORS = (TimeoutError, gevent.Timeout)
except ImportError:  # pragma: no cover - gevent comes with tritonclient[http]
    pass

_http_del_patched = False


def _patch_http_client_del() -> None:
    """Make tritonclient.http's `__del__` quiet when the client is collected in another thread.

    geventhttpclient objects belong to the gevent hub of the thread that made them; closing them from the
    garbage collector in another thread raises. The pytriton clients close their tritonclients
    explicitly, so the finaliser may skip what it cannot do.
    """
    global _http_del_patched
    if _http_del_patched:
        return
    _http_del_patched = True
    original_del = tritonclient.http.InferenceServerClient.__del__

    def _quiet_del(self: Any) -> None:
        with contextlib.suppress(Exception):
            original_del(self)

    tritonclient.http.InferenceServerClient.__del__ = _quiet_del


class ModelClient(BaseModelClient):
    """Synchronous client (tritonclient.http or tritonclient.grpc).

    Use it from one thread; `FuturesModelClient` serves many threads.
    """

    _general_client: Any
    _infer_client: Any

    def _connect(self) -> None:
        _patch_http_client_del()
        self._general_client = self.create_client_from_url(self._url, network_timeout_s=self._network_timeout_s)
        self._infer_client = self.create_client_from_url(self._url, network_timeout_s=self._inference_timeout_s)
        if not self._lazy_init:
            try:
                self._ensure_ready(self._init_timeout_s)
            except BaseException:
                self.close()
                raise

    def get_lib(self) -> ModuleType:
        """The tritonclient module used for this client's scheme."""
        return cast(ModuleType, {"grpc": tritonclient.grpc, "http": tritonclient.http}[self._scheme])

    def create_client_from_url(self, url: str, network_timeout_s: float | None = None) -> Any:
        """A tritonclient InferenceServerClient for `url` (HTTP: every request bounded by `network_timeout_s`)."""
        return _create_client_from_url(url, network_timeout_s=network_timeout_s)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections; the client cannot be used afterwards."""
        for attribute in ("_general_client", "_infer_client"):
            client = getattr(self, attribute, None)
            setattr(self, attribute, None)
            if client is not None:
                try:
                    client.close()
                except Exception as exc:  # noqa: BLE001 - e.g. a gevent client closed from another thread
                    _LOGGER.debug("Error while closing %s: %s", attribute, exc)

    def _check_open(self) -> None:
        if self._general_client is None or self._infer_client is None:
            raise PyTritonClientClosedError("ModelClient is closed")

    def _ensure_ready(self, timeout_s: float) -> TritonModelConfig:
        """Wait for the model (unless known ready) and fetch its configuration (unless known); return it."""
        self._check_open()
        if self._model_ready and self._model_config is not None:
            return self._model_config
        return run_blocking(self._ensure_ready_steps(self._general_client, timeout_s))

    def wait_for_model(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the server and the model to be ready.

        Raises:
            PyTritonClientTimeoutError: not ready in time.
            PyTritonClientModelUnavailableError: the server does not have the model.
            PyTritonClientClosedError: the client is closed.
        """
        self._check_open()
        wait_for_model_ready(
            self._general_client, self._model_name, self._model_version, timeout_s=timeout_s,
            headers=self._auth_headers,
        )
        self._model_ready = True

    def wait_for_server(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the server to be live and ready."""
        self._check_open()
        wait_for_server_ready(self._general_client, timeout_s=timeout_s, headers=self._auth_headers)

    def load_model(self, config: str | None = None, files: dict[str, Any] | None = None) -> None:
        """Ask the server to load the model (needs model-repository access, often an access token)."""
        self._check_open()
        headers = self._request_builder.headers(None)
        try:
            self._general_client.load_model(self._model_name, headers=headers, config=config, files=files)
        except Exception as exc:
            raise convert_server_error(exc, f"loading model {self._model_name}") from exc
        self._model_ready = False
        self._model_config = None

    def unload_model(self) -> None:
        """Ask the server to unload the model (needs model-repository access, often an access token)."""
        self._check_open()
        try:
            self._general_client.unload_model(self._model_name, headers=self._request_builder.headers(None))
        except Exception as exc:
            raise convert_server_error(exc, f"unloading model {self._model_name}") from exc
        self._model_ready = False
        self._model_config = None

    @property
    def model_config(self) -> TritonModelConfig:
        """The model's configuration (waits up to init_timeout_s for the model to be ready)."""
        if self._model_config is None:
            return self._ensure_ready(self._init_timeout_s)
        return self._model_config

    @property
    def is_batching_supported(self) -> bool:
        """Whether the model batches (max_batch_size > 0)."""
        return self.model_config.max_batch_size > 0

    def infer_sample(
        self, *inputs: Any, parameters: ParamsOrHeaders = None, headers: ParamsOrHeaders = None, **named_inputs: Any
    ) -> dict[str, np.ndarray]:
        """Infer one sample: for a batching model the batch axis is added to inputs and removed from outputs.

        Raises:
            PyTritonClientValueError: positional and named inputs mixed, or invalid inputs/parameters.
            PyTritonClientTimeoutError: the model was not ready in time or the inference took too long.
            PyTritonClientModelUnavailableError: the server does not have the model.
            PyTritonClientInferenceServerError: the server or the inference callable failed.
        """
        call = InferCall.from_arguments(inputs, named_inputs, parameters, headers).for_sample(self.model_config)
        return call.outputs(self._infer(call))

    def infer_batch(
        self, *inputs: Any, parameters: ParamsOrHeaders = None, headers: ParamsOrHeaders = None, **named_inputs: Any
    ) -> dict[str, np.ndarray]:
        """Infer a batch (the first axis of every input is the batch axis).

        Raises:
            PyTritonClientModelDoesntSupportBatchingError: the model's max_batch_size is 0.
            (and the errors of `infer_sample`)
        """
        call = InferCall.from_arguments(inputs, named_inputs, parameters, headers).for_batch(self.model_config)
        return self._infer(call)

    def _infer(self, call: InferCall) -> dict[str, np.ndarray]:
        model_config = self._ensure_ready(self._init_timeout_s)
        request = self._request_builder.infer_request(model_config, call, self._inference_timeout_s)
        try:
            result = self._infer_client.infer(**request)
        except _TIMEOUT_ERRORS as exc:
            self._reset_infer_client()
            raise infer_timeout_error(self._inference_timeout_s, exc) from None
        except Exception as exc:
            raise convert_server_error(exc, "inference request") from exc
        return result_to_dict(result)

    def _reset_infer_client(self) -> None:
        """After an HTTP timeout the connection may still receive the late response: start afresh."""
        if self._scheme != "http" or self._infer_client is None:
            return
        old = self._infer_client
        self._infer_client = self.create_client_from_url(self._url, network_timeout_s=self._inference_timeout_s)
        with contextlib.suppress(Exception):
            old.close()
