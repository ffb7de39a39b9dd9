"""The Ray Serve deployments: `TritonReplica` hosts an in-process server in each replica; `TritonIngress` is the
application's ingress, which takes Triton's HTTP and gRPC requests from Serve's proxies (and numpy calls from other
deployments' handles) and hands them to a replica, once more to another one when the first died under the request.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import grpc
import orjson
import ray
from ray import serve
from ray.exceptions import RayActorError
from ray.serve.exceptions import DeploymentUnavailableError
from starlette.requests import Request
from starlette.responses import Response

from pytriton.ray._host import (
    GRPC_LOCAL_METHODS,
    GRPC_UNARY_METHODS,
    CallableModel,
    ReplicaServer,
    grpc_code_number,
)
from pytriton.ray._metrics import MetricsExport
from pytriton.ray._protos import service_pb2 as pb

logger = logging.getLogger("pytriton.ray")

# What a call to a replica raises when the replica died (or was unreachable) under it: tried once more, on another.
RETRYABLE = (RayActorError, DeploymentUnavailableError)
ATTEMPTS = 2
_CODES = {grpc_code_number(code): code for code in grpc.StatusCode}


class ReplicaUnavailable(Exception):
    """No replica could answer the request (both tries hit a replica that died)."""


@serve.deployment(name="TritonReplica", health_check_period_s=2.0, health_check_timeout_s=30.0)
class TritonReplica:
    """One replica: an in-process pytriton server with the deployment's models (a repository and/or callables)."""

    def __init__(self, model_repository: str | None = None, models: Sequence[CallableModel] = (),
                 server_options: dict[str, Any] | None = None, metrics_export_period_s: float | None = 5.0):
        self._host = ReplicaServer(model_repository, models, server_options)
        self._export = MetricsExport(self._host, metrics_export_period_s) if metrics_export_period_s else None
        context = serve.get_replica_context()
        logger.info("replica %s serves %s (GPUs %s)", context.replica_id, self._host.model_names(),
                    ray.get_gpu_ids())

    def check_health(self) -> None:
        """Serve's health check: the replica is unhealthy (and replaced) while a model of it is not ready."""
        ready, why = self._host.ready()
        if not ready:
            raise RuntimeError(f"pytriton replica not ready: {why}")

    def __del__(self) -> None:
        host = getattr(self, "_host", None)
        if host is not None:
            if self._export is not None:
                self._export.stop()
            host.stop()

    async def http(self, method: str, path: str, query: str, headers: list[tuple[str, str]], body: bytes,
                   peer: str | None) -> tuple[int, list[tuple[str, str]], bytes]:
        return await self._host.http(method, path, query, headers, body, peer)

    async def grpc(self, method: str, request: bytes, metadata: list[tuple[str, str]], peer: str
                   ) -> tuple[int, str, bytes]:  # fmt: skip
        return await self._host.grpc(method, request, metadata, peer)

    async def grpc_stream(self, request: bytes, metadata: list[tuple[str, str]], peer: str
                          ) -> AsyncIterator[tuple[int, str, bytes]]:  # fmt: skip
        async for item in self._host.grpc_stream(request, metadata, peer):
            yield item

    async def infer(self, inputs: dict[str, Any], model_name: str | None = None, model_version: int = -1,
                    parameters: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self._host.infer(inputs, model_name, model_version, parameters)

    def metrics(self) -> str:
        """This replica's server metrics, Prometheus text."""
        return self._host.metrics()

    def replica_info(self) -> dict[str, Any]:
        """Where this replica runs: its id, node, process, GPUs (as Ray assigned them) and models."""
        context = serve.get_replica_context()
        return {
            "replica_id": context.replica_id.unique_id, "actor_name": ray.get_runtime_context().get_actor_name(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "models": self._host.model_names(),
        }


class _Serialized:
    """A gRPC response that is already bytes (Serve's replica calls `SerializeToString()` on what a method returns)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def SerializeToString(self) -> bytes:  # noqa: N802 - protobuf's name
        return self.data


def _call_info(grpc_context: Any) -> tuple[list[tuple[str, str]], str]:
    """A gRPC call's metadata (text values) and peer."""
    if grpc_context is None:
        return [], ""
    metadata = [(k, v if isinstance(v, str) else v.decode("latin-1")) for k, v in grpc_context.invocation_metadata()]
    return metadata, grpc_context.peer()


def _stream_error(request: bytes, message: str) -> bytes:
    """A ModelStreamInferResponse with `error_message`, naming the request's model and id."""
    parsed = pb.ModelInferRequest.FromString(request)
    response = pb.ModelInferResponse(model_name=parsed.model_name, model_version=parsed.model_version, id=parsed.id)
    response.parameters["triton_final_response"].bool_param = True
    return bytes(pb.ModelStreamInferResponse(error_message=message, infer_response=response).SerializeToString())


def _grpc_method(name: str) -> Any:
    async def method(self: TritonIngress, request: Any, grpc_context: Any = None) -> _Serialized:
        metadata, peer = _call_info(grpc_context)
        try:
            code, details, data = await self._forward("grpc", name, request.SerializeToString(), metadata, peer)
        except ReplicaUnavailable as exc:
            code, details, data = grpc_code_number(grpc.StatusCode.UNAVAILABLE), str(exc), b""
        if code and grpc_context is not None:
            grpc_context.set_code(_CODES.get(code, grpc.StatusCode.UNKNOWN))
            grpc_context.set_details(details)
        return _Serialized(data)

    method.__name__ = method.__qualname__ = name
    return method


@serve.deployment(name="TritonIngress")
class TritonIngress:
    """The application's ingress: Triton's HTTP API (`__call__`), its gRPC service (a method per RPC, the names
    Serve's gRPC proxy calls) and `infer` for other deployments, each handed to a `TritonReplica`."""

    def __init__(self, replicas: Any):
        self._replicas = replicas
        self._retried = 0  # requests tried again after their replica died under them
        self._unavailable = 0  # requests answered 503 / UNAVAILABLE (the retry's replica died too)

    def failover_counts(self) -> dict[str, int]:
        """This ingress replica's requests retried on another replica, and those given up (503 / UNAVAILABLE)."""
        return {"retried": self._retried, "unavailable": self._unavailable}

    async def _forward(self, method: str, *args: Any) -> Any:
        last: BaseException | None = None
        for attempt in range(ATTEMPTS):
            try:
                return await getattr(self._replicas, method).remote(*args)
            except RETRYABLE as exc:
                last = exc
                if attempt + 1 < ATTEMPTS:
                    self._retried += 1
                else:
                    self._unavailable += 1
                logger.warning("a replica failed under a request (%s); %s", type(exc).__name__,
                               "trying another" if attempt + 1 < ATTEMPTS else "giving up")
        raise ReplicaUnavailable(f"the replica serving the request died and so did the retry: {last}")

    async def __call__(self, request: Request) -> Response:
        path = request.url.path
        root = request.scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):] or "/"
        client = request.client
        try:
            status, headers, body = await self._forward(
                "http", request.method, path, request.url.query, list(request.headers.items()), await request.body(),
                client.host if client is not None else None)
        except ReplicaUnavailable as exc:
            return Response(orjson.dumps({"error": str(exc)}), 503, media_type="application/json")
        return Response(body, status, headers=dict(headers))

    async def ModelStreamInfer(self, requests: Any, grpc_context: Any = None) -> AsyncIterator[_Serialized]:  # noqa: N802
        """Triton's bidirectional stream through Serve's gRPC proxy: each request of the stream goes to a replica
        (concurrently), its responses come back as the model sends them (decoupled models too). A request whose
        replica died before answering is tried once more on another; one whose replica died after some responses
        gets a final error response (`error_message`), as other errors of one request do."""
        metadata, peer = _call_info(grpc_context)
        queue: asyncio.Queue[_Serialized | tuple[int, str] | None] = asyncio.Queue()
        tasks: set[asyncio.Task[None]] = set()

        async def one(data: bytes) -> None:
            for attempt in range(ATTEMPTS):
                sent = False
                try:
                    stream = self._replicas.options(stream=True).grpc_stream.remote(data, metadata, peer)
                    async for code, details, body in stream:
                        if code:
                            queue.put_nowait((code, details))
                            return
                        sent = True
                        queue.put_nowait(_Serialized(body))
                    return
                except RETRYABLE as exc:
                    if sent or attempt + 1 == ATTEMPTS:
                        self._unavailable += 1
                        queue.put_nowait(_Serialized(_stream_error(data, f"the replica serving the request died: "
                                                                         f"{type(exc).__name__}")))
                        return
                    self._retried += 1

        async def read() -> None:
            try:
                async for request in requests:
                    task = asyncio.ensure_future(one(request.SerializeToString()))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                if tasks:
                    await asyncio.gather(*list(tasks), return_exceptions=True)
            finally:
                queue.put_nowait(None)

        reader = asyncio.ensure_future(read())
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, tuple):
                    if grpc_context is not None:
                        grpc_context.set_code(_CODES.get(item[0], grpc.StatusCode.UNKNOWN))
                        grpc_context.set_details(item[1])
                    return
                yield item
            await reader
        finally:
            reader.cancel()
            for task in list(tasks):
                task.cancel()

    async def infer(self, inputs: dict[str, Any], model_name: str | None = None, model_version: int = -1,
                    parameters: dict[str, Any] | None = None) -> dict[str, Any]:
        """Numpy inputs in, numpy outputs out (no HTTP): `handle.infer.remote({"x": array})`."""
        return cast(dict[str, Any], await self._forward("infer", inputs, model_name, model_version, parameters))


for _name in (*GRPC_UNARY_METHODS, *GRPC_LOCAL_METHODS):
    setattr(TritonIngress.func_or_class, _name, _grpc_method(_name))  # type: ignore[attr-defined]  # a Deployment

__all__ = ["ReplicaUnavailable", "TritonIngress", "TritonReplica"]
