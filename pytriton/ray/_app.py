"""Building a pytriton application for `serve.run`, and what Serve's gRPC proxy needs to speak Triton's service."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ray.serve import Application
from ray.serve.config import gRPCOptions
from tritonclient.grpc import service_pb2_grpc

from pytriton.model_config.model_config import ModelConfig
from pytriton.model_config.tensor import Tensor
from pytriton.ray import _protos
from pytriton.ray._host import CallableModel
from pytriton.ray._serve import TritonIngress, TritonReplica

GRPC_SERVICER_FUNCTION = "pytriton.ray.add_servicer_to_server"


def add_servicer_to_server(servicer: Any, server: Any) -> None:
    """Triton's `inference.GRPCInferenceService` on Serve's gRPC proxy. Give its import path
    (`GRPC_SERVICER_FUNCTION`) in `gRPCOptions.grpc_servicer_functions`: importing it in the proxy makes Triton's
    messages picklable there (the proxy pickles each request for the replica)."""
    _protos.register()
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)


def grpc_options(port: int = 9000, request_timeout_s: float | None = None) -> gRPCOptions:
    """`serve.start(grpc_options=...)` for Triton's gRPC service on `port`."""
    return gRPCOptions(port=port, grpc_servicer_functions=[GRPC_SERVICER_FUNCTION],
                       request_timeout_s=request_timeout_s)


def triton_app(
    model_repository: str | None = None,
    models: Sequence[CallableModel] = (),
    *,
    server_options: dict[str, Any] | None = None,
    num_replicas: int | str | None = None,
    autoscaling_config: dict[str, Any] | None = None,
    ray_actor_options: dict[str, Any] | None = None,
    max_ongoing_requests: int | None = None,
    metrics_export_period_s: float | None = 5.0,
    ingress_options: dict[str, Any] | None = None,
    **deployment_options: Any,
) -> Application:
    """The application: `TritonReplica`s serving a model repository and/or callables behind a `TritonIngress`.

    `num_replicas`, `autoscaling_config`, `ray_actor_options`, `max_ongoing_requests` and other
    `deployment_options` are Serve's options of the replicas' deployment; `ingress_options` those of the ingress
    (by default one replica with 0.1 CPU); `server_options` the
    in-process server's `tritonserver.Options` fields.
    """
    options: dict[str, Any] = dict(deployment_options)
    for name, value in (("num_replicas", num_replicas), ("autoscaling_config", autoscaling_config),
                        ("ray_actor_options", ray_actor_options), ("max_ongoing_requests", max_ongoing_requests)):
        if value is not None:
            options[name] = value
    replica_deployment: Any = TritonReplica
    ingress_deployment: Any = TritonIngress
    replicas = replica_deployment.options(**options).bind(model_repository, list(models), server_options,
                                                           metrics_export_period_s)
    ingress = dict(ingress_options or {})
    ingress.setdefault("ray_actor_options", {"num_cpus": 0.1})
    ingress.setdefault("max_ongoing_requests", 1000)
    return ingress_deployment.options(**ingress).bind(replicas)


def from_repository(model_repository: str, **options: Any) -> Application:
    """An application serving the Triton model repository at `model_repository` (a path on every node)."""
    return triton_app(model_repository, **options)


def from_callable(
    model_name: str,
    infer_func: Callable[..., Any] | Sequence[Callable[..., Any]] | str,
    inputs: Sequence[Tensor],
    outputs: Sequence[Tensor],
    model_version: int = 1,
    config: ModelConfig | None = None,
    strict: bool = False,
    **options: Any,
) -> Application:
    """An application serving one PyTriton callable, bound as `Triton.bind` binds it, in each replica."""
    model = CallableModel(model_name, infer_func, inputs, outputs, model_version, config, strict)
    return triton_app(None, [model], **options)


__all__ = ["GRPC_SERVICER_FUNCTION", "add_servicer_to_server", "from_callable", "from_repository", "grpc_options",
           "triton_app"]
