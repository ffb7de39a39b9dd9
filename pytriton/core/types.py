"""Protocol-neutral inference requests and responses, as the front-ends hand them to the core."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from pytriton.proxy.messages import TensorData


@dataclasses.dataclass
class RequestedOutput:
    name: str
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class InferRequest:
    """An inference request after wire decoding: tensors carry their raw bytes (`TensorData.data`)."""

    model_name: str
    model_version: str = ""
    id: str = ""
    inputs: list[TensorData] = dataclasses.field(default_factory=list)
    outputs: list[RequestedOutput] = dataclasses.field(default_factory=list)
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class InferResponse:
    """Outputs of one request. Their buffers may live in a worker's arena: call `release()` once sent."""

    model_name: str
    model_version: str
    id: str
    outputs: list[TensorData]
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    _release: Callable[[], None] | None = None

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()
