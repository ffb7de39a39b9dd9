"""`DecoupledModelClient`: the synchronous client of decoupled models (gRPC streams)."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from pytriton.client._errors import convert_server_error
from pytriton.client._model_client import ModelClient
from pytriton.client._request_builder import InferCall, Outputs, ParamsOrHeaders, stream_response, stream_timeout_error
from pytriton.client.exceptions import PyTritonClientError, PyTritonClientInferenceServerError

_LOGGER = logging.getLogger("pytriton.client")


class _StreamResponses:
    """Iterator over the responses of one streamed request of a `DecoupledModelClient`."""

    def __init__(
        self,
        owner: DecoupledModelClient,
        responses: queue.Queue[tuple[Any, Exception | None]],
        call: InferCall,
        timeout_s: float,
    ):
        self._owner = owner
        self._responses = responses
        self._call = call
        self._timeout_s = timeout_s
        self._done = False

    def __iter__(self) -> _StreamResponses:
        return self

    def __next__(self) -> Outputs:
        while True:
            if self._done:
                raise StopIteration
            try:
                result, error = self._responses.get(timeout=self._timeout_s)
            except queue.Empty:
                self.close()
                raise stream_timeout_error(self._timeout_s) from None
            try:
                outputs, final = stream_response(result, error)
            except PyTritonClientError:
                self.close()
                raise
            if final:
                self.close()
                if not outputs:
                    raise StopIteration
            elif not outputs:
                continue
            return self._call.outputs(outputs)

    def close(self) -> None:
        """Stop the stream (also when the iteration is abandoned early)."""
        if not self._done:
            self._done = True
            self._owner._finish_stream()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _stream_error(responses: queue.Queue[tuple[Any, Exception | None]]) -> Exception | None:
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

    _grpc_only = "DecoupledModelClient"

    def _connect(self) -> None:
        self._stream_lock = threading.Lock()
        self._stream_active = False
        super()._connect()

    def infer_sample(  # type: ignore[override]  # streams: an iterator
        self, *inputs: Any, parameters: ParamsOrHeaders = None, headers: ParamsOrHeaders = None, **named_inputs: Any
    ) -> Iterator[dict[str, np.ndarray]]:
        """Stream one sample; an iterator over the responses (batch axis removed for batching models)."""
        call = InferCall.from_arguments(inputs, named_inputs, parameters, headers)
        return self._stream(call.for_sample(self.model_config))

    def infer_batch(  # type: ignore[override]  # streams: an iterator
        self, *inputs: Any, parameters: ParamsOrHeaders = None, headers: ParamsOrHeaders = None, **named_inputs: Any
    ) -> Iterator[dict[str, np.ndarray]]:
        """Stream one batch; an iterator over the responses."""
        call = InferCall.from_arguments(inputs, named_inputs, parameters, headers)
        return self._stream(call.for_batch(self.model_config))

    def _stream(self, call: InferCall) -> _StreamResponses:
        model_config = self._ensure_ready(self._init_timeout_s)
        request = self._request_builder.stream_request(model_config, call)
        with self._stream_lock:
            if self._stream_active:
                raise PyTritonClientInferenceServerError("Inference is already in progress")
            self._stream_active = True
        responses: queue.Queue[tuple[Any, Exception | None]] = queue.Queue()
        try:
            self._infer_client.start_stream(
                callback=lambda result, error: responses.put((result, error)),
                headers=self._request_builder.headers(call.headers),
            )
            self._infer_client.async_stream_infer(**request, enable_empty_final_response=True)
        except Exception as exc:
            self._finish_stream()  # joins tritonclient's response thread: the stream's own error is queued by now
            raise convert_server_error(_stream_error(responses) or exc, "inference request") from exc
        return _StreamResponses(self, responses, call, self._inference_timeout_s)

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
