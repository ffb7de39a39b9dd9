"""Clients for models served by a Triton-compatible server (this one, PyTriton or Triton itself).

Typical usage:

    with ModelClient("localhost", "MyModel") as client:
        result_dict = client.infer_sample(input_a=a, input_b=b)

Inference inputs are given either positionally (mapped onto the model's inputs in configuration order)
or by name; mixing both raises `PyTritonClientValueError`. Outputs come back as a dict name -> np.ndarray.

All clients accept `access_token=`; its header (`triton-access-token` over HTTP,
`triton-grpc-protocol-triton-access-token` over gRPC) goes with every call they make.

This module is where PyTriton documents the clients (`pytriton.client.client.ModelClient`); each lives in a
module of its own, over the shared request builder (`_request_builder`):

- `_base_client`: `BaseModelClient` (url, model, timeouts, access token, start-up steps);
- `_model_client`: `ModelClient`; `_decoupled_client`: `DecoupledModelClient`;
- `_asyncio_client`: `AsyncioModelClient`, `AsyncioDecoupledModelClient`;
- `_futures_client`: `FuturesModelClient`.
"""

from __future__ import annotations

from pytriton.client._asyncio_client import AsyncioDecoupledModelClient, AsyncioModelClient
from pytriton.client._base_client import DEFAULT_INFERENCE_TIMEOUT_S, BaseModelClient
from pytriton.client._decoupled_client import DecoupledModelClient
from pytriton.client._futures_client import FuturesModelClient
from pytriton.client._model_client import ModelClient
from pytriton.client._request_builder import ParamsOrHeaders

__all__ = [
    "DEFAULT_INFERENCE_TIMEOUT_S",
    "AsyncioDecoupledModelClient",
    "AsyncioModelClient",
    "BaseModelClient",
    "DecoupledModelClient",
    "FuturesModelClient",
    "ModelClient",
    "ParamsOrHeaders",
]
