"""Clients for models served by a Triton-compatible server (this one, PyTriton or Triton itself).

Typical usage:

    with ModelClient("localhost", "MyModel") as client:
        result_dict = client.infer_sample(input_a=a, input_b=b)

Inference inputs are given either positionally (mapped onto the model's inputs in configuration order)
or by name; mixing both raises `PyTritonClientValueError`. Outputs come back as a dict name -> np.ndarray.

All clients accept `access_token=`; its header (`triton-access-token` over HTTP,
`triton-grpc-protocol-triton-access-token` over gRPC) goes with every call they make.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from concurrent.futures import Future
from typing import Any

import numpy as np
import tritonclient.grpc
import tritonclient.grpc.aio
import tritonclient.http
import tritonclient.http.aio
from tritonclient.utils import np_to_triton_dtype

from pytriton.client.asyncio_utils import (
    _asyncio_fetch_model_config,
    asyncio_wait_for_model_ready,
    asyncio_wait_for_server_ready,
)
from pytriton.client.asyncio_utils import create_client_from_url as _asyncio_create_client_from_url
from pytriton.client.auth import create_auth_headers, extract_access_token_from_headers
from pytriton.client.exceptions import (
    PyTritonClientClosedError,
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientQueueFullError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from pytriton.client.utils import (
    _DEFAULT_NETWORK_TIMEOUT_S,
    TritonUrl,
    _fetch_model_config,
    _version,
    convert_server_error,
    wait_for_model_ready,
    wait_for_server_ready,
)
from pytriton.client.utils import create_client_from_url as _create_client_from_url
from pytriton.model_config.triton_model_config import TritonModelConfig

_LOGGER = logging.getLogger(__name__)

DEFAULT_INFERENCE_TIMEOUT_S = 60.0
_DEFAULT_SYNC_INIT_TIMEOUT_S = 300.0
_DEFAULT_FUTURES_INIT_TIMEOUT_S = 300.0
_DEFAULT_FUTURES_MAX_WORKERS = 128
_DEFAULT_FUTURES_MAX_QUEUE_SIZE = 128

_TIMEOUT_ERRORS: tuple[type, ...] = (TimeoutError,)
try:  # geventhttpclient (tritonclient.http) reports a network timeout as gevent.Timeout, a BaseException
    import gevent

    _TIMEOUT_ERRORS = (TimeoutError, gevent.Timeout)
except ImportError:  # pragma: no cover - gevent comes with tritonclient[http]
    pass

ParamsOrHeaders = dict[str, str | int | bool] | None


# ---- argument checks and tensor conversion -----------------------------------------------------------


def _verify_inputs_args(inputs: tuple, named_inputs: dict) -> None:
    if not inputs and not named_inputs:
        raise PyTritonClientValueError("Provide input data")
    if inputs and named_inputs:
        raise PyTritonClientValueError("Use either positional either keyword method arguments convention")


def _verify_parameters(values: Any, what: str = "parameters") -> None:
    if values is None:
        return
    if not isinstance(values, Mapping):
        raise PyTritonClientValueError(f"{what} must be a dictionary, got {type(values).__name__}")
    for key, value in values.items():
        if not isinstance(key, str):
            raise PyTritonClientValueError(f"{what} keys must be strings, got {key!r}")
        if not isinstance(value, (str, int, float, bool)):
            raise PyTritonClientValueError(
                f"{what} values must be str, int, float or bool; {key!r} is {type(value).__name__}"
            )


def _merge_headers(auth_headers: dict[str, str], headers: ParamsOrHeaders) -> dict[str, str] | None:
    merged = dict(auth_headers)
    for key, value in (headers or {}).items():
        merged[key] = str(value)
    return merged or None


def _as_array(name: str, data: Any) -> np.ndarray:
    array = data if isinstance(data, np.ndarray) else np.asarray(data)
    if array.dtype.kind == "U":
        raise PyTritonClientValueError(
            f"Unicode inputs are not supported. Encode numpy array for {name!r} input "
            "(ex. with np.char.encode(array, 'utf-8'))."
        )
    if array.dtype == object:
        for element in array.flat:
            if not isinstance(element, bytes):
                raise PyTritonClientValueError(
                    f"Numpy array for {name!r} input with dtype=object should contain encoded strings "
                    f"(e.g. into utf-8). Element type: {type(element)}"
                )
    return array


def _add_batch_axis(data: Any, name: str) -> np.ndarray:
    return _as_array(name, data)[np.newaxis, ...]


def _named_inputs(model_config: TritonModelConfig, inputs: tuple | dict) -> dict[str, Any]:
    if isinstance(inputs, dict):
        return inputs
    specs = model_config.inputs
    if len(inputs) > len(specs):
        names = [spec.name for spec in specs]
        raise PyTritonClientValueError(
            f"Model {model_config.model_name} has {len(specs)} inputs {names}; {len(inputs)} positional inputs given"
        )
    return {spec.name: data for spec, data in zip(specs, inputs)}


def _infer_inputs(lib: Any, named: dict[str, Any]) -> list:
    infer_inputs = []
    for name, data in named.items():
        array = _as_array(name, data)
        datatype = np_to_triton_dtype(array.dtype)
        if datatype is None:
            raise PyTritonClientValueError(f"Input {name!r}: numpy dtype {array.dtype} has no Triton datatype")
        infer_input = lib.InferInput(name, list(array.shape), datatype)
        infer_input.set_data_from_numpy(array)
        infer_inputs.append(infer_input)
    return infer_inputs


def _result_to_dict(result: Any) -> dict[str, np.ndarray]:
    if result is None:
        return {}
    response = result.get_response()
    if isinstance(response, dict):  # HTTP
        names = [output["name"] for output in response.get("outputs", [])]
    else:  # gRPC ModelInferResponse
        names = [output.name for output in response.outputs]
    return {name: result.as_numpy(name) for name in names}


def _is_final_response(result: Any) -> bool:
    if result is None:
        return False
    parameters = result.get_response().parameters
    return "triton_final_response" in parameters and parameters["triton_final_response"].bool_param


def _unbatch(result: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: data[0] for name, data in result.items()}


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

    def _quiet_del(self):
        with contextlib.suppress(Exception):
            original_del(self)

    tritonclient.http.InferenceServerClient.__del__ = _quiet_del


# ---- base ------------------------------------------------------------------------------------------------


class BaseModelClient:
    """What every model client shares: url, model, timeouts, access token, lazily fetched model config."""

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
        self._init_timeout_s = _DEFAULT_SYNC_INIT_TIMEOUT_S if init_timeout_s is None else float(init_timeout_s)
        self._inference_timeout_s = (
            DEFAULT_INFERENCE_TIMEOUT_S if inference_timeout_s is None else float(inference_timeout_s)
        )
        self._network_timeout_s = min(_DEFAULT_NETWORK_TIMEOUT_S, self._init_timeout_s)
        self._triton_url = TritonUrl.from_url(url)
        self._url = self._triton_url.with_scheme
        self._scheme = self._triton_url.scheme
        self._model_name = model_name
        self._model_version = model_version
        self._access_token = access_token
        self._auth_headers = create_auth_headers(access_token, self._scheme)
        self._request_id_generator = itertools.count(0)
        self._model_config = model_config
        self._model_ready = model_config is not None and not ensure_model_is_ready
        self._lazy_init = lazy_init
        self._triton_client_lib = self.get_lib()

    @classmethod
    def from_existing_client(cls, existing_client: BaseModelClient):
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

    def get_lib(self):
        """The tritonclient module used for this client's scheme."""
        raise NotImplementedError

    def _next_request_id(self) -> str:
        return str(next(self._request_id_generator))

    def _check_not_decoupled(self, model_config: TritonModelConfig) -> None:
        if model_config.decoupled:
            raise PyTritonClientInferenceServerError(
                f"Model {model_config.model_name} config is decoupled. Use DecoupledModelClient instead."
            )

    def _check_batching(self, model_config: TritonModelConfig) -> None:
        if model_config.max_batch_size <= 0:
            raise PyTritonClientModelDoesntSupportBatchingError(
                f"Model {model_config.model_name} doesn't support batching - use infer_sample method instead"
            )


# ---- synchronous ---------------------------------------------------------------------------------------


class ModelClient(BaseModelClient):
    """Synchronous client (tritonclient.http or tritonclient.grpc).

    Use it from one thread; `FuturesModelClient` serves many threads.
    """

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
        super().__init__(
            url,
            model_name,
            model_version,
            lazy_init=lazy_init,
            init_timeout_s=init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            model_config=model_config,
            ensure_model_is_ready=ensure_model_is_ready,
            access_token=access_token,
        )
        _patch_http_client_del()
        self._general_client = self.create_client_from_url(self._url, network_timeout_s=self._network_timeout_s)
        self._infer_client = self.create_client_from_url(self._url, network_timeout_s=self._inference_timeout_s)
        if not lazy_init:
            try:
                self._ensure_ready(self._init_timeout_s)
            except BaseException:
                self.close()
                raise

    def get_lib(self):
        """The tritonclient module used for this client's scheme."""
        return {"grpc": tritonclient.grpc, "http": tritonclient.http}[self._scheme]

    def create_client_from_url(self, url: str, network_timeout_s: float | None = None):
        """A tritonclient InferenceServerClient for `url` (HTTP: every request bounded by `network_timeout_s`)."""
        return _create_client_from_url(url, network_timeout_s=network_timeout_s)

    def __enter__(self):
        return self

    def __exit__(self, *_):
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

    def _ensure_ready(self, timeout_s: float) -> None:
        """Wait for the model (unless known ready) and fetch its configuration (unless known)."""
        self._check_open()
        if self._model_ready and self._model_config is not None:
            return
        start = time.monotonic()
        if not self._model_ready:
            wait_for_model_ready(
                self._general_client, self._model_name, self._model_version, timeout_s=timeout_s,
                headers=self._auth_headers,
            )
            self._model_ready = True
        if self._model_config is None:
            remaining = max(timeout_s - (time.monotonic() - start), 1.0)
            self._model_config = _fetch_model_config(
                self._general_client, self._model_name, self._model_version, self._auth_headers, remaining
            )

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

    def load_model(self, config: str | None = None, files: dict | None = None) -> None:
        """Ask the server to load the model (needs model-repository access, often an access token)."""
        self._check_open()
        try:
            self._general_client.load_model(
                self._model_name, headers=_merge_headers(self._auth_headers, None), config=config, files=files
            )
        except Exception as exc:
            raise convert_server_error(exc, f"loading model {self._model_name}") from exc
        self._model_ready = False
        self._model_config = None

    def unload_model(self) -> None:
        """Ask the server to unload the model (needs model-repository access, often an access token)."""
        self._check_open()
        try:
            self._general_client.unload_model(self._model_name, headers=_merge_headers(self._auth_headers, None))
        except Exception as exc:
            raise convert_server_error(exc, f"unloading model {self._model_name}") from exc
        self._model_ready = False
        self._model_config = None

    @property
    def model_config(self) -> TritonModelConfig:
        """The model's configuration (waits up to init_timeout_s for the model to be ready)."""
        if self._model_config is None:
            self._ensure_ready(self._init_timeout_s)
        return self._model_config

    @property
    def is_batching_supported(self) -> bool:
        """Whether the model batches (max_batch_size > 0)."""
        return self.model_config.max_batch_size > 0

    def infer_sample(
        self,
        *inputs,
        parameters: ParamsOrHeaders = None,
        headers: ParamsOrHeaders = None,
        **named_inputs,
    ) -> dict[str, np.ndarray]:
        """Infer one sample: for a batching model the batch axis is added to inputs and removed from outputs.

        Raises:
            PyTritonClientValueError: positional and named inputs mixed, or invalid inputs/parameters.
            PyTritonClientTimeoutError: the model was not ready in time or the inference took too long.
            PyTritonClientModelUnavailableError: the server does not have the model.
            PyTritonClientInferenceServerError: the server or the inference callable failed.
        """
        _verify_inputs_args(inputs, named_inputs)
        _verify_parameters(parameters, "parameters")
        _verify_parameters(headers, "headers")
        batching = self.is_batching_supported
        if batching:
            inputs, named_inputs = self._batched(inputs, named_inputs)
        result = self._infer(inputs or named_inputs, parameters, headers)
        return _unbatch(result) if batching else result

    def infer_batch(
        self,
        *inputs,
        parameters: ParamsOrHeaders = None,
        headers: ParamsOrHeaders = None,
        **named_inputs,
    ) -> dict[str, np.ndarray]:
        """Infer a batch (the first axis of every input is the batch axis).

        Raises:
            PyTritonClientModelDoesntSupportBatchingError: the model's max_batch_size is 0.
            (and the errors of `infer_sample`)
        """
        _verify_inputs_args(inputs, named_inputs)
        _verify_parameters(parameters, "parameters")
        _verify_parameters(headers, "headers")
        self._check_batching(self.model_config)
        return self._infer(inputs or named_inputs, parameters, headers)

    def _batched(self, inputs: tuple, named_inputs: dict) -> tuple[tuple, dict]:
        if inputs:
            names = [spec.name for spec in self.model_config.inputs] + [f"#{i}" for i in range(len(inputs))]
            return tuple(_add_batch_axis(data, names[i]) for i, data in enumerate(inputs)), named_inputs
        return inputs, {name: _add_batch_axis(data, name) for name, data in named_inputs.items()}

    def _infer(self, inputs: tuple | dict, parameters: ParamsOrHeaders, headers: ParamsOrHeaders):
        self._ensure_ready(self._init_timeout_s)
        model_config = self._model_config
        self._check_not_decoupled(model_config)
        infer_inputs = _infer_inputs(self._triton_client_lib, _named_inputs(model_config, inputs))
        kwargs: dict[str, Any] = {
            "model_name": self._model_name,
            "inputs": infer_inputs,
            "model_version": _version(self._model_version),
            "request_id": self._next_request_id(),
            "parameters": dict(parameters) if parameters else None,
            "headers": _merge_headers(self._auth_headers, headers),
        }
        if self._scheme == "grpc":
            kwargs["client_timeout"] = self._inference_timeout_s
        try:
            result = self._infer_client.infer(**kwargs)
        except _TIMEOUT_ERRORS as exc:
            self._reset_infer_client()
            raise PyTritonClientTimeoutError(
                f"Timeout occurred during inference request. Timeout: {self._inference_timeout_s} s ({exc!r})"
            ) from None
        except Exception as exc:
            raise convert_server_error(exc, "inference request") from exc
        return _result_to_dict(result)

    def _reset_infer_client(self) -> None:
        """After an HTTP timeout the connection may still receive the late response: start afresh."""
        if self._scheme != "http" or self._infer_client is None:
            return
        old = self._infer_client
        self._infer_client = self.create_client_from_url(self._url, network_timeout_s=self._inference_timeout_s)
        with contextlib.suppress(Exception):
            old.close()


class _StreamResponses:
    """Iterator over the responses of one streamed request of a `DecoupledModelClient`."""

    def __init__(self, owner: DecoupledModelClient, responses: queue.Queue, unbatch: bool, timeout_s: float):
        self._owner = owner
        self._responses = responses
        self._unbatch = unbatch
        self._timeout_s = timeout_s
        self._done = False

    def __iter__(self):
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        while True:
            if self._done:
                raise StopIteration
            try:
                result, error = self._responses.get(timeout=self._timeout_s)
            except queue.Empty:
                self.close()
                raise PyTritonClientTimeoutError(
                    f"Timeout occurred during inference request: no response within {self._timeout_s} s"
                ) from None
            if error is not None:
                self.close()
                raise convert_server_error(error, "inference request")
            outputs = _result_to_dict(result)
            if _is_final_response(result):
                self.close()
                if not outputs:
                    raise StopIteration
            elif not outputs:
                continue
            return _unbatch(outputs) if self._unbatch else outputs

    def close(self) -> None:
        """Stop the stream (also when the iteration is abandoned early)."""
        if not self._done:
            self._done = True
            self._owner._finish_stream()

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()


def _stream_error(responses: queue.Queue) -> Exception | None:
    """The error a stream ended with before its request could be sent (e.g. the server refused the stream at once:
    tritonclient then only says the stream is "no longer in valid state"; the reason went to the callback)."""
    while not responses.empty():
        _, error = responses.get_nowait()
        if error is not None:
            return error
    return None


class DecoupledModelClient(ModelClient):
    """Synchronous client for decoupled models (gRPC only): `infer_sample` / `infer_batch` return an
    iterator over the streamed responses. One inference at a time per client."""

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
        if TritonUrl.from_url(url).scheme != "grpc":
            raise PyTritonClientValueError("DecoupledModelClient is only supported for grpc protocol")
        self._stream_lock = threading.Lock()
        self._stream_active = False
        super().__init__(
            url,
            model_name,
            model_version,
            lazy_init=lazy_init,
            init_timeout_s=init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            model_config=model_config,
            ensure_model_is_ready=ensure_model_is_ready,
            access_token=access_token,
        )

    def infer_sample(
        self,
        *inputs,
        parameters: ParamsOrHeaders = None,
        headers: ParamsOrHeaders = None,
        **named_inputs,
    ) -> Iterator[dict[str, np.ndarray]]:
        """Stream one sample; an iterator over the responses (batch axis removed for batching models)."""
        _verify_inputs_args(inputs, named_inputs)
        _verify_parameters(parameters, "parameters")
        _verify_parameters(headers, "headers")
        batching = self.is_batching_supported
        if batching:
            inputs, named_inputs = self._batched(inputs, named_inputs)
        return self._stream(inputs or named_inputs, parameters, headers, unbatch=batching)

    def infer_batch(
        self,
        *inputs,
        parameters: ParamsOrHeaders = None,
        headers: ParamsOrHeaders = None,
        **named_inputs,
    ) -> Iterator[dict[str, np.ndarray]]:
        """Stream one batch; an iterator over the responses."""
        _verify_inputs_args(inputs, named_inputs)
        _verify_parameters(parameters, "parameters")
        _verify_parameters(headers, "headers")
        self._check_batching(self.model_config)
        return self._stream(inputs or named_inputs, parameters, headers, unbatch=False)

    def _stream(
        self, inputs: tuple | dict, parameters: ParamsOrHeaders, headers: ParamsOrHeaders, unbatch: bool
    ) -> _StreamResponses:
        self._ensure_ready(self._init_timeout_s)
        infer_inputs = _infer_inputs(self._triton_client_lib, _named_inputs(self._model_config, inputs))
        with self._stream_lock:
            if self._stream_active:
                raise PyTritonClientInferenceServerError("Inference is already in progress")
            self._stream_active = True
        responses: queue.Queue = queue.Queue()
        try:
            self._infer_client.start_stream(
                callback=lambda result, error: responses.put((result, error)),
                headers=_merge_headers(self._auth_headers, headers),
            )
            self._infer_client.async_stream_infer(
                self._model_name,
                infer_inputs,
                model_version=_version(self._model_version),
                request_id=self._next_request_id(),
                enable_empty_final_response=True,
                parameters=dict(parameters) if parameters else None,
            )
        except Exception as exc:
            self._finish_stream()  # joins tritonclient's response thread: the stream's own error is queued by now
            raise convert_server_error(_stream_error(responses) or exc, "inference request") from exc
        return _StreamResponses(self, responses, unbatch, self._inference_timeout_s)

    def close(self) -> None:
        """Cancel a stream still running, then close the connections."""
        with self._stream_lock:
            active = self._stream_active
        if active:
            self._finish_stream()
        super().close()

    def _finish_stream(self) -> None:
        client = self._infer_client
        try:
            if client is not None:
                client.stop_stream(cancel_requests=True)
        except Exception as exc:  # noqa: BLE001
            _LOGGER.debug("Error while stopping the stream: %s", exc)
        finally:
            with self._stream_lock:
                self._stream_active = False


# ---- asyncio ------------------------------------------------------------------------------------------------


class AsyncioModelClient(BaseModelClient):
    """Asyncio client (tritonclient.http.aio or tritonclient.grpc.aio).

    The connections are made at first use, on the running event loop; use the client on that loop only.

        async with AsyncioModelClient("grpc://localhost", "MyModel") as client:
            result = await client.infer_sample(a, b)
    """

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
        super().__init__(
            url,
            model_name,
            model_version,
            lazy_init=lazy_init,
            init_timeout_s=init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            model_config=model_config,
            ensure_model_is_ready=ensure_model_is_ready,
            access_token=access_token,
        )
        self._general_client = None
        self._infer_client = None
        self._closed = False

    def get_lib(self):
        """The tritonclient module used for this client's scheme."""
        return {"grpc": tritonclient.grpc.aio, "http": tritonclient.http.aio}[self._scheme]

    def create_client_from_url(self, url: str, network_timeout_s: float | None = None):
        """An asyncio tritonclient for `url` (call it with the event loop running)."""
        return _asyncio_create_client_from_url(url, network_timeout_s=network_timeout_s)

    def _clients(self):
        if self._closed:
            raise PyTritonClientClosedError("AsyncioModelClient is closed")
        if self._general_client is None:
            self._general_client = self.create_client_from_url(self._url, network_timeout_s=self._network_timeout_s)
        if self._infer_client is None:
            self._infer_client = self.create_client_from_url(self._url, network_timeout_s=self._inference_timeout_s)
        return self._general_client, self._infer_client

    async def __aenter__(self):
        try:
            if not self._lazy_init:
                await self._ensure_ready(self._init_timeout_s)
            return self
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, *_):
        await self.close()

    async def close(self) -> None:
        """Close the connections; the client cannot be used afterwards."""
        self._closed = True
        for attribute in ("_general_client", "_infer_client"):
            client = getattr(self, attribute, None)
            setattr(self, attribute, None)
            if client is not None:
                try:
                    await client.close()
                except Exception as exc:  # noqa: BLE001
                    _LOGGER.debug("Error while closing %s: %s", attribute, exc)

    async def _ensure_ready(self, timeout_s: float) -> None:
        general, _ = self._clients()
        if self._model_ready and self._model_config is not None:
            return
        start = time.monotonic()
        if not self._model_ready:
            await asyncio_wait_for_model_ready(
                general, self._model_name, self._model_version, timeout_s=timeout_s, headers=self._auth_headers
            )
            self._model_ready = True
        if self._model_config is None:
            remaining = max(timeout_s - (time.monotonic() - start), 1.0)
            self._model_config = await _asyncio_fetch_model_config(
                general, self._model_name, self._model_version, self._auth_headers, remaining
            )

    async def wait_for_model(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the server and the model to be ready."""
        general, _ = self._clients()
        await asyncio_wait_for_model_ready(
            general, self._model_name, self._model_version, timeout_s=timeout_s, headers=self._auth_headers
        )
        self._model_ready = True

    async def wait_for_server(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the server to be live and ready."""
        general, _ = self._clients()
        await asyncio_wait_for_server_ready(general, timeout_s=timeout_s, headers=self._auth_headers)

    async def _get_model_config(self) -> TritonModelConfig:
        if self._model_config is None:
            await self._ensure_ready(self._init_timeout_s)
        return self._model_config

    @property
    def model_config(self):
        """Awaitable: the model's configuration (`await client.model_config`)."""
        return self._get_model_config()

    @property
    def is_batching_supported(self):
        """Awaitable: whether the model batches (`await client.is_batching_supported`)."""

        async def _batching() -> bool:
            return (await self._get_model_config()).max_batch_size > 0

        return _batching()

    async def infer_sample(
        self,
        *inputs,
        parameters: ParamsOrHeaders = None,
        headers: ParamsOrHeaders = None,
        **named_inputs,
    ) -> dict[str, np.ndarray]:
        """Infer one sample (batch axis added and removed for batching models)."""
        _verify_inputs_args(inputs, named_inputs)
        _verify_parameters(parameters, "parameters")
        _verify_parameters(headers, "headers")
        model_config = await self._get_model_config()
        batching = model_config.max_batch_size > 0
        if batching:
            inputs, named_inputs = _batched_inputs(model_config, inputs, named_inputs)
        result = await self._infer(inputs or named_inputs, parameters, headers)
        return _unbatch(result) if batching else result

    async def infer_batch(
        self,
        *inputs,
        parameters: ParamsOrHeaders = None,
        headers: ParamsOrHeaders = None,
        **named_inputs,
    ) -> dict[str, np.ndarray]:
        """Infer a batch; raises PyTritonClientModelDoesntSupportBatchingError for max_batch_size 0."""
        _verify_inputs_args(inputs, named_inputs)
        _verify_parameters(parameters, "parameters")
        _verify_parameters(headers, "headers")
        self._check_batching(await self._get_model_config())
        return await self._infer(inputs or named_inputs, parameters, headers)

    async def _infer(self, inputs: tuple | dict, parameters: ParamsOrHeaders, headers: ParamsOrHeaders):
        await self._ensure_ready(self._init_timeout_s)
        _, infer_client = self._clients()
        model_config = self._model_config
        self._check_not_decoupled(model_config)
        infer_inputs = _infer_inputs(self._triton_client_lib, _named_inputs(model_config, inputs))
        kwargs: dict[str, Any] = {
            "model_name": self._model_name,
            "inputs": infer_inputs,
            "model_version": _version(self._model_version),
            "request_id": self._next_request_id(),
            "parameters": dict(parameters) if parameters else None,
            "headers": _merge_headers(self._auth_headers, headers),
        }
        if self._scheme == "grpc":
            kwargs["client_timeout"] = self._inference_timeout_s
        try:
            result = await asyncio.wait_for(infer_client.infer(**kwargs), self._inference_timeout_s)
        except asyncio.TimeoutError:
            raise PyTritonClientTimeoutError(
                f"Timeout occurred during inference request. Timeout: {self._inference_timeout_s} s"
            ) from None
        except Exception as exc:
            raise convert_server_error(exc, "inference request") from exc
        return _result_to_dict(result)


def _batched_inputs(model_config: TritonModelConfig, inputs: tuple, named_inputs: dict) -> tuple[tuple, dict]:
    if inputs:
        names = [spec.name for spec in model_config.inputs] + [f"#{i}" for i in range(len(inputs))]
        return tuple(_add_batch_axis(data, names[i]) for i, data in enumerate(inputs)), named_inputs
    return inputs, {name: _add_batch_axis(data, name) for name, data in named_inputs.items()}


class AsyncioDecoupledModelClient(AsyncioModelClient):
    """Asyncio client for decoupled models (gRPC only): `infer_sample` / `infer_batch` are async generators.

        async with AsyncioDecoupledModelClient("grpc://localhost", "Generator") as client:
            async for response in client.infer_sample(prompt):
                ...
    """

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
        if TritonUrl.from_url(url).scheme != "grpc":
            raise PyTritonClientValueError("AsyncioDecoupledModelClient is only supported for grpc protocol")
        super().__init__(
            url,
            model_name,
            model_version,
            lazy_init=lazy_init,
            init_timeout_s=init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            model_config=model_config,
            ensure_model_is_ready=ensure_model_is_ready,
            access_token=access_token,
        )

    async def infer_sample(  # type: ignore[override]
        self,
        *inputs,
        parameters: ParamsOrHeaders = None,
        headers: ParamsOrHeaders = None,
        **named_inputs,
    ) -> AsyncIterator[dict[str, np.ndarray]]:
        """Stream one sample: yields each response (batch axis removed for batching models)."""
        _verify_inputs_args(inputs, named_inputs)
        _verify_parameters(parameters, "parameters")
        _verify_parameters(headers, "headers")
        model_config = await self._get_model_config()
        batching = model_config.max_batch_size > 0
        if batching:
            inputs, named_inputs = _batched_inputs(model_config, inputs, named_inputs)
        async for result in self._stream(inputs or named_inputs, parameters, headers):
            yield _unbatch(result) if batching else result

    async def infer_batch(  # type: ignore[override]
        self,
        *inputs,
        parameters: ParamsOrHeaders = None,
        headers: ParamsOrHeaders = None,
        **named_inputs,
    ) -> AsyncIterator[dict[str, np.ndarray]]:
        """Stream one batch: yields each response."""
        _verify_inputs_args(inputs, named_inputs)
        _verify_parameters(parameters, "parameters")
        _verify_parameters(headers, "headers")
        self._check_batching(await self._get_model_config())
        async for result in self._stream(inputs or named_inputs, parameters, headers):
            yield result

    async def _stream(
        self, inputs: tuple | dict, parameters: ParamsOrHeaders, headers: ParamsOrHeaders
    ) -> AsyncIterator[dict[str, np.ndarray]]:
        await self._ensure_ready(self._init_timeout_s)
        _, infer_client = self._clients()
        infer_inputs = _infer_inputs(self._triton_client_lib, _named_inputs(self._model_config, inputs))
        request = {
            "model_name": self._model_name,
            "inputs": infer_inputs,
            "model_version": _version(self._model_version),
            "request_id": self._next_request_id(),
            "parameters": dict(parameters) if parameters else None,
        }

        async def _requests():
            yield request

        try:
            responses = infer_client.stream_infer(_requests(), headers=_merge_headers(self._auth_headers, headers))
        except Exception as exc:
            raise convert_server_error(exc, "inference request") from exc
        finished = False
        try:
            while True:
                try:
                    result, error = await asyncio.wait_for(responses.__anext__(), self._inference_timeout_s)
                except StopAsyncIteration:
                    finished = True
                    return
                except asyncio.TimeoutError:
                    raise PyTritonClientTimeoutError(
                        f"Timeout occurred during inference request: no response within {self._inference_timeout_s} s"
                    ) from None
                except PyTritonClientError:
                    raise
                except Exception as exc:
                    raise convert_server_error(exc, "inference request") from exc
                if error is not None:
                    raise convert_server_error(error, "inference request")
                outputs = _result_to_dict(result)
                final = _is_final_response(result)
                if outputs:
                    yield outputs
                if final:
                    finished = True
                    return
        finally:
            if not finished:
                with contextlib.suppress(Exception):
                    responses.cancel()


# ---- futures ------------------------------------------------------------------------------------------------

_INFER_SAMPLE = "infer_sample"
_INFER_BATCH = "infer_batch"
_MODEL_CONFIG = "model_config"
_WAIT_FOR_MODEL = "wait_for_model"
_CLOSE = object()


class FuturesModelClient:
    """Thread-pool client: every call returns a `concurrent.futures.Future`.

    Up to `max_workers` threads each own a `ModelClient` (made in that thread; once one has the model
    configuration the others reuse it). Requests wait in a queue of `max_queue_size`; when it is full a
    call blocks, or with `non_blocking=True` raises `PyTritonClientQueueFullError`.

        with FuturesModelClient("grpc://localhost", "MyModel") as client:
            future = client.infer_sample(a, b)
            print(future.result())
    """

    def __init__(
        self,
        url: str,
        model_name: str,
        model_version: str | None = None,
        *,
        max_workers: int | None = _DEFAULT_FUTURES_MAX_WORKERS,
        max_queue_size: int | None = _DEFAULT_FUTURES_MAX_QUEUE_SIZE,
        non_blocking: bool = False,
        init_timeout_s: float | None = None,
        inference_timeout_s: float | None = None,
        access_token: str | None = None,
    ):
        """See the class docstring; the timeouts and `access_token` are those of `ModelClient`."""
        TritonUrl.from_url(url)  # fail early on a bad url
        if max_workers is None:
            max_workers = _DEFAULT_FUTURES_MAX_WORKERS
        if max_workers <= 0:
            raise ValueError("max_workers must be greater than 0")
        if max_queue_size is not None and max_queue_size < 0:
            raise ValueError("max_queue_size must be greater than or equal to 0")
        self._url = url
        self._model_name = model_name
        self._model_version = model_version
        self._max_workers = max_workers
        self._non_blocking = non_blocking
        self._init_timeout_s = _DEFAULT_FUTURES_INIT_TIMEOUT_S if init_timeout_s is None else init_timeout_s
        self._inference_timeout_s = inference_timeout_s
        self._access_token = access_token
        self._queue: queue.Queue = queue.Queue(maxsize=max_queue_size or 0)
        self._threads: list = []
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._model_config: TritonModelConfig | None = None
        self._closed = False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self.close()

    def close(self, wait: bool = True) -> None:
        """Stop the workers once the queued requests are done; with `wait`, return only when they have."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(_CLOSE)
        if wait:
            for thread in threads:
                thread.join()
            self._cancel_leftovers()

    def _cancel_leftovers(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not _CLOSE:
                future = item[0]
                if future.set_running_or_notify_cancel():
                    future.set_exception(PyTritonClientClosedError("FuturesModelClient is closed"))

    def wait_for_model(self, timeout_s: float) -> Future:
        """A Future that resolves to None once the server and model are ready (or fails after `timeout_s`)."""
        return self._execute(_WAIT_FOR_MODEL, timeout_s)

    def model_config(self) -> Future:
        """A Future of the model's `TritonModelConfig`."""
        return self._execute(_MODEL_CONFIG, None)

    def infer_sample(
        self,
        *inputs,
        parameters: ParamsOrHeaders = None,
        headers: ParamsOrHeaders = None,
        **named_inputs,
    ) -> Future:
        """A Future of `ModelClient.infer_sample(...)`'s result."""
        return self._execute(_INFER_SAMPLE, (inputs, parameters, headers, named_inputs))

    def infer_batch(
        self,
        *inputs,
        parameters: ParamsOrHeaders = None,
        headers: ParamsOrHeaders = None,
        **named_inputs,
    ) -> Future:
        """A Future of `ModelClient.infer_batch(...)`'s result."""
        return self._execute(_INFER_BATCH, (inputs, parameters, headers, named_inputs))

    def _execute(self, name: str, request: Any) -> Future:
        if self._closed:
            raise PyTritonClientClosedError("FuturesModelClient is already closed")
        future: Future = Future()
        item = (future, name, request)
        if self._non_blocking:
            try:
                self._queue.put_nowait(item)
            except queue.Full:
                raise PyTritonClientQueueFullError("Queue is full") from None
        else:
            self._queue.put(item)
        self._adjust_thread_count()
        return future

    def _adjust_thread_count(self) -> None:
        with self._lock:
            closed = self._closed
        if not closed and self._idle.acquire(timeout=0):
            return
        with self._lock:
            if len(self._threads) < self._max_workers or self._closed:
                thread = threading.Thread(
                    target=self._worker, name=f"FuturesModelClient-{len(self._threads)}", daemon=True
                )
                thread.start()
                self._threads.append(thread)
        if closed:  # the request raced with close(): a worker serves it, then stops
            self._queue.put(_CLOSE)

    def _new_client(self) -> ModelClient:
        kwargs: dict[str, Any] = {}
        if self._model_config is not None:
            kwargs = {"model_config": self._model_config, "ensure_model_is_ready": False}
        return ModelClient(
            self._url,
            self._model_name,
            self._model_version,
            init_timeout_s=self._init_timeout_s,
            inference_timeout_s=self._inference_timeout_s,
            access_token=self._access_token,
            **kwargs,
        )

    def _worker(self) -> None:
        client: ModelClient | None = None
        try:
            while True:
                item = self._queue.get()
                if item is _CLOSE:
                    break
                future, name, request = item
                if future.set_running_or_notify_cancel():
                    try:
                        if client is None:
                            client = self._new_client()
                        result = self._run(client, name, request)
                    except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
                    if client is not None and self._model_config is None and client._model_config is not None:
                        self._model_config = client._model_config
                del item, future, request
                self._idle.release()
        finally:
            if client is not None:
                client.close()

    @staticmethod
    def _run(client: ModelClient, name: str, request: Any) -> Any:
        if name == _WAIT_FOR_MODEL:
            return client.wait_for_model(request)
        if name == _MODEL_CONFIG:
            return client.model_config
        inputs, parameters, headers, named_inputs = request
        method = client.infer_sample if name == _INFER_SAMPLE else client.infer_batch
        return method(*inputs, parameters=parameters, headers=headers, **named_inputs)
