"""`AsyncioModelClient` and `AsyncioDecoupledModelClient` (tritonclient.http.aio / tritonclient.grpc.aio)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import tritonclient.grpc.aio
import tritonclient.http.aio

from pytriton.client._base_client import BaseModelClient
from pytriton.client._errors import convert_server_error
from pytriton.client._request_builder import (
    InferCall,
    Outputs,
    ParamsOrHeaders,
    infer_timeout_error,
    result_to_dict,
    stream_response,
    stream_timeout_error,
)
from pytriton.client._steps import run_asyncio
from pytriton.client.asyncio_utils import asyncio_wait_for_model_ready, asyncio_wait_for_server_ready
from pytriton.client.asyncio_utils import create_client_from_url as _asyncio_create_client_from_url
from pytriton.client.exceptions import PyTritonClientClosedError, PyTritonClientError
from pytriton.model_config.triton_model_config import TritonModelConfig

if TYPE_CHECKING:
    from typing_extensions import Self

_LOGGER = logging.getLogger("pytriton.client")


class AsyncioModelClient(BaseModelClient):
    """Asyncio client (tritonclient.http.aio or tritonclient.grpc.aio).

    The connections are made at first use, on the running event loop; use the client on that loop only.

        async with AsyncioModelClient("grpc://localhost", "MyModel") as client:
            result = await client.infer_sample(a, b)
    """

    _general_client: Any
    _infer_client: Any

    def _connect(self) -> None:
        self._general_client = None
        self._infer_client = None
        self._closed = False

    def get_lib(self) -> ModuleType:
        """The tritonclient module used for this client's scheme."""
        return cast(ModuleType, {"grpc": tritonclient.grpc.aio, "http": tritonclient.http.aio}[self._scheme])

    def create_client_from_url(self, url: str, network_timeout_s: float | None = None) -> Any:
        """An asyncio tritonclient for `url` (call it with the event loop running)."""
        return _asyncio_create_client_from_url(url, network_timeout_s=network_timeout_s)

    def _clients(self) -> tuple[Any, Any]:
        if self._closed:
            raise PyTritonClientClosedError("AsyncioModelClient is closed")
        if self._general_client is None:
            self._general_client = self.create_client_from_url(self._url, network_timeout_s=self._network_timeout_s)
        if self._infer_client is None:
            self._infer_client = self.create_client_from_url(self._url, network_timeout_s=self._inference_timeout_s)
        return self._general_client, self._infer_client

    async def __aenter__(self) -> Self:
        try:
            if not self._lazy_init:
                await self._ensure_ready(self._init_timeout_s)
            return self
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, *_: object) -> None:
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

    async def _ensure_ready(self, timeout_s: float) -> TritonModelConfig:
        general, _ = self._clients()
        if self._model_ready and self._model_config is not None:
            return self._model_config
        return await run_asyncio(self._ensure_ready_steps(general, timeout_s))

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
            return await self._ensure_ready(self._init_timeout_s)
        return self._model_config

    @property
    def model_config(self) -> Awaitable[TritonModelConfig]:
        """Awaitable: the model's configuration (`await client.model_config`)."""
        return self._get_model_config()

    @property
    def is_batching_supported(self) -> Awaitable[bool]:
        """Awaitable: whether the model batches (`await client.is_batching_supported`)."""

        async def _batching() -> bool:
            return (await self._get_model_config()).max_batch_size > 0

        return _batching()

    async def infer_sample(
        self, *inputs: Any, parameters: ParamsOrHeaders = None, headers: ParamsOrHeaders = None, **named_inputs: Any
    ) -> dict[str, np.ndarray]:
        """Infer one sample (batch axis added and removed for batching models)."""
        call = InferCall.from_arguments(inputs, named_inputs, parameters, headers)
        call = call.for_sample(await self._get_model_config())
        return call.outputs(await self._infer(call))

    async def infer_batch(
        self, *inputs: Any, parameters: ParamsOrHeaders = None, headers: ParamsOrHeaders = None, **named_inputs: Any
    ) -> dict[str, np.ndarray]:
        """Infer a batch; raises PyTritonClientModelDoesntSupportBatchingError for max_batch_size 0."""
        call = InferCall.from_arguments(inputs, named_inputs, parameters, headers)
        return await self._infer(call.for_batch(await self._get_model_config()))

    async def _infer(self, call: InferCall) -> Outputs:
        model_config = await self._ensure_ready(self._init_timeout_s)
        _, infer_client = self._clients()
        request = self._request_builder.infer_request(model_config, call, self._inference_timeout_s)
        try:
            result = await asyncio.wait_for(infer_client.infer(**request), self._inference_timeout_s)
        except asyncio.TimeoutError:
            raise infer_timeout_error(self._inference_timeout_s) from None
        except Exception as exc:
            raise convert_server_error(exc, "inference request") from exc
        return result_to_dict(result)


class AsyncioDecoupledModelClient(AsyncioModelClient):
    """Asyncio client for decoupled models (gRPC only): `infer_sample` / `infer_batch` are async generators.

        async with AsyncioDecoupledModelClient("grpc://localhost", "Generator") as client:
            async for response in client.infer_sample(prompt):
                ...
    """

    _grpc_only = "AsyncioDecoupledModelClient"

    async def infer_sample(  # type: ignore[override]  # streams: async iterator
        self, *inputs: Any, parameters: ParamsOrHeaders = None, headers: ParamsOrHeaders = None, **named_inputs: Any
    ) -> AsyncIterator[dict[str, np.ndarray]]:
        """Stream one sample: yields each response (batch axis removed for batching models)."""
        call = InferCall.from_arguments(inputs, named_inputs, parameters, headers)
        call = call.for_sample(await self._get_model_config())
        async for result in self._stream(call):
            yield call.outputs(result)

    async def infer_batch(  # type: ignore[override]  # streams: async iterator
        self, *inputs: Any, parameters: ParamsOrHeaders = None, headers: ParamsOrHeaders = None, **named_inputs: Any
    ) -> AsyncIterator[dict[str, np.ndarray]]:
        """Stream one batch: yields each response."""
        call = InferCall.from_arguments(inputs, named_inputs, parameters, headers)
        async for result in self._stream(call.for_batch(await self._get_model_config())):
            yield result

    async def _stream(self, call: InferCall) -> AsyncIterator[Outputs]:
        model_config = await self._ensure_ready(self._init_timeout_s)
        _, infer_client = self._clients()
        request = self._request_builder.stream_request(model_config, call)

        async def _requests() -> AsyncIterator[Any]:
            yield request

        try:
            responses = infer_client.stream_infer(_requests(), headers=self._request_builder.headers(call.headers))
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
                    raise stream_timeout_error(self._inference_timeout_s) from None
                except PyTritonClientError:
                    raise
                except Exception as exc:
                    raise convert_server_error(exc, "inference request") from exc
                outputs, final = stream_response(result, error)
                if outputs:
                    yield outputs
                if final:
                    finished = True
                    return
        finally:
            if not finished:
                with contextlib.suppress(Exception):
                    responses.cancel()
