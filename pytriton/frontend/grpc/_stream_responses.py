"""The responses of a ModelStreamInfer stream: each as a stream message (`stream_message`), on their way to the
transport in a bounded queue (`StreamResponses`)."""

from __future__ import annotations

import asyncio
from typing import TypeAlias

from tritonclient.grpc import service_pb2 as pb

from pytriton.core.registry import Model
from pytriton.core.types import InferResponse
from pytriton.exceptions import ServerError
from pytriton.frontend.grpc._convert import to_infer_response
from pytriton.frontend.grpc.wire import InferRequestView, StreamResponseWire, release_unsent

# A stream's header asking that the first error a request meets once issued end the stream with its gRPC status
# (Triton's "triton_grpc_error" mode; any other value than "true" leaves the stream as it is)
GRPC_ERROR_HEADER = "triton_grpc_error"
# The failure reasons (ServerError.failure_reason) of a request that failed once issued: its execution, its queue
ISSUED_FAILURES = ("BACKEND", "REJECTED")


class StreamError:
    """(triton_grpc_error mode) The error that ends a stream: the stream's status becomes its status."""

    __slots__ = ("error",)

    def __init__(self, error: ServerError):
        self.error = error


StreamItem: TypeAlias = "StreamResponseWire | pb.ModelStreamInferResponse"  # what ModelStreamInfer yields
Queued: TypeAlias = "StreamItem | StreamError"  # what waits on StreamResponses


def stream_message(model: Model, request: InferRequestView, response: InferResponse | None, final: bool) -> StreamItem:
    """A stream response: an inference response with its final flag (an empty one when `response` is None)."""
    if response is None:
        message = pb.ModelInferResponse(model_name=model.name, model_version=str(model.version), id=request.id)
        message.parameters["triton_final_response"].bool_param = final
        return pb.ModelStreamInferResponse(infer_response=message)
    wire = to_infer_response(response)
    wire.parameters["triton_final_response"].bool_param = final
    return StreamResponseWire(wire)


STREAM_RESPONSES_QUEUED = 64  # responses of one ModelStreamInfer stream waiting for the transport (then producers wait)


class StreamResponses:
    """The responses of one ModelStreamInfer stream on their way to the transport, then None once no more will come.
    Once STREAM_RESPONSES_QUEUED wait, producers wait (each holding its one response) until half of them are taken:
    they go on in batches, not one response per turn of the loop."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Queued | None] = asyncio.Queue()
        self._room = asyncio.Event()
        self._room.set()

    async def put(self, item: Queued) -> None:
        if self._queue.qsize() >= STREAM_RESPONSES_QUEUED:
            self._room.clear()
        if not self._room.is_set():
            try:
                await self._room.wait()
            except BaseException:  # cancelled while it waited: its buffers go back now
                release_unsent(item)
                raise
        self._queue.put_nowait(item)

    async def get(self) -> Queued | None:
        item = await self._queue.get()
        if not self._room.is_set() and self._queue.qsize() <= STREAM_RESPONSES_QUEUED // 2:
            self._room.set()
        return item

    def close(self) -> None:
        self._queue.put_nowait(None)

    def release_unsent(self) -> None:
        """The stream ended: responses the client will not get give their buffers back now."""
        while not self._queue.empty():
            release_unsent(self._queue.get_nowait())
