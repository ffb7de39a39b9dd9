"""A model given to `Triton.bind`/`RemoteTriton.bind`: its server-side configuration, and the threads of the user's
process that host its callables (one per instance) once the server has loaded it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pytriton.backends.spec import WorkerSpec
from pytriton.backends.target import CallableTarget
from pytriton.config.trace import model_trace_settings
from pytriton.exceptions import PyTritonValidationError
from pytriton.model_config.declaration import tensor_specs
from pytriton.model_config.model_config import ModelConfig
from pytriton.model_config.tensor import Tensor
from pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pytriton.proxy.control import LoadReply, LoadRequest

logger = logging.getLogger("pytriton.triton")


class BoundModel:
    """A model given to `bind`: its server-side config and what hosts it."""

    def __init__(
        self,
        model_name: str,
        infer_func: Callable[..., Any] | Sequence[Callable[..., Any]] | str,
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
        model_version: int,
        config: ModelConfig,
        strict: bool,
        trace_config: list[str] | None = None,
    ):
        if any(t.optional for t in outputs):
            raise PyTritonValidationError("Output tensors cannot be optional.")
        if isinstance(infer_func, str):
            try:
                # a file path relative to this process's cwd: the server process runs elsewhere
                self.target: str | None = str(CallableTarget.parse(infer_func).absolute())
            except ValueError as exc:
                raise PyTritonValidationError(f"infer_func: {exc}") from None
            self.functions: list[Callable[..., Any]] = []
            instance_count = 1
        else:
            self.target = None
            self.functions = [infer_func] if callable(infer_func) else list(infer_func)
            if not self.functions or not all(callable(f) for f in self.functions):
                raise PyTritonValidationError("infer_func has to be a callable, a sequence of callables or 'module:fn'")
            instance_count = len(self.functions)
        self.config = TritonModelConfig(
            model_name=model_name,
            inputs=tensor_specs(inputs, "INPUT"),
            outputs=tensor_specs(outputs, "OUTPUT"),
            model_version=model_version,
            max_batch_size=config.max_batch_size if config.batching else 0,
            instance_count=instance_count,
            decoupled=config.decoupled,
            batcher=config.batcher if config.batching and config.sequence_batcher is None else None,
            response_cache=config.response_cache,
            strict=strict,
            sequence_batcher=config.sequence_batcher,
        )
        self.trace_config = list(trace_config) if trace_config else None
        if self.trace_config:
            try:
                model_trace_settings(self.trace_config)
            except ValueError as exc:
                raise PyTritonValidationError(f"bind(trace_config=...) of model '{model_name}': {exc}") from None
        self.threads: list[threading.Thread] = []
        self.stop_event = threading.Event()
        self.loaded = False

    @property
    def name(self) -> str:
        return self.config.model_name

    def load_request(self, timeout_s: float) -> LoadRequest:
        """What asks the server to load this model: worker processes for an import path, else our threads."""
        if self.target is not None:
            return LoadRequest(config=self.config, hosting="spawn", callable=self.target, timeout_s=timeout_s,
                               trace_config=self.trace_config)
        return LoadRequest(config=self.config, hosting="external", timeout_s=timeout_s, trace_config=self.trace_config)

    def start_hosts(self, reply: LoadReply) -> None:
        """Start one thread per callable, each serving the instance the server made for it."""
        from pytriton.backends import worker

        self.stop_event = threading.Event()
        self.threads = []
        for index, (identity, fn) in enumerate(zip(reply.identities, self.functions)):
            spec = WorkerSpec.for_thread(reply.server, identity, self.config, index)
            thread = threading.Thread(target=worker.serve, args=(spec, fn, self.stop_event),
                                      name=f"pytriton-{self.name}-{index}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def hosts_alive(self) -> bool:
        return all(t.is_alive() for t in self.threads)

    def stop_hosts(self) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(10.0)
        self.threads = []
