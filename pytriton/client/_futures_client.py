"""`FuturesModelClient`: a thread pool of `ModelClient`s; every call returns a `concurrent.futures.Future`."""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np

from pytriton.client._model_client import ModelClient
from pytriton.client._request_builder import ParamsOrHeaders
from pytriton.client.exceptions import PyTritonClientClosedError, PyTritonClientQueueFullError
from pytriton.client.utils import TritonUrl
from pytriton.model_config.triton_model_config import TritonModelConfig

if TYPE_CHECKING:
    from typing_extensions import Self

_DEFAULT_FUTURES_INIT_TIMEOUT_S = 300.0
_DEFAULT_FUTURES_MAX_WORKERS = 128
_DEFAULT_FUTURES_MAX_QUEUE_SIZE = 128

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
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue_size or 0)
        self._threads: list[Any] = []
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._model_config: TritonModelConfig | None = None
        self._closed = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, exc_value: object, traceback: object) -> None:
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

    def wait_for_model(self, timeout_s: float) -> Future[None]:
        """A Future that resolves to None once the server and model are ready (or fails after `timeout_s`)."""
        return self._execute(_WAIT_FOR_MODEL, timeout_s)

    def model_config(self) -> Future[TritonModelConfig]:
        """A Future of the model's `TritonModelConfig`."""
        return self._execute(_MODEL_CONFIG, None)

    def infer_sample(
        self, *inputs: Any, parameters: ParamsOrHeaders = None, headers: ParamsOrHeaders = None, **named_inputs: Any
    ) -> Future[dict[str, np.ndarray]]:
        """A Future of `ModelClient.infer_sample(...)`'s result."""
        return self._execute(_INFER_SAMPLE, (inputs, parameters, headers, named_inputs))

    def infer_batch(
        self, *inputs: Any, parameters: ParamsOrHeaders = None, headers: ParamsOrHeaders = None, **named_inputs: Any
    ) -> Future[dict[str, np.ndarray]]:
        """A Future of `ModelClient.infer_batch(...)`'s result."""
        return self._execute(_INFER_BATCH, (inputs, parameters, headers, named_inputs))

    def _execute(self, name: str, request: Any) -> Future[Any]:
        if self._closed:
            raise PyTritonClientClosedError("FuturesModelClient is already closed")
        future: Future[Any] = Future()
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
        """A worker's client, with the model configuration another worker has already read."""
        return ModelClient.from_existing_client(self)  # type: ignore[arg-type]  # it has the same settings

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
