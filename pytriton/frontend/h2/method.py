"""A gRPC method as the HTTP/2 transport runs it (`Method`), the context its handler gets (`Context`), and what a method
that answers without a task of its own returns (`UnaryPending`)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Protocol

import grpc

from pytriton.frontend.h2.message import RpcAbort
from pytriton.frontend.h2.send import OnSent

if TYPE_CHECKING:
    from pytriton.frontend.h2.stream import Stream


class Method:
    """One RPC: its handler and (de)serialisers. `serialize` returns the message as a list of buffers;
    `on_sent(response)`, where given, returns the callable that gives the response's buffers back (called once,
    when the transport no longer needs them). `compress`: its responses are gzip-compressed for clients that
    accept gzip when the connection has a compression level (the infer methods). `in_place`: its large messages
    may be received into the core's receive buffers (the infer methods, whose tensors are then passed uncopied).
    `begin(request, context)`, where given, starts a unary call without a task of its own (see `UnaryPending`;
    `handler` runs the calls whose answers are compressed). `max_message_bytes()`, where given, bounds its request messages below
    the connection's limit (declared and decompressed), e.g. the repository extension's to what a load may carry."""

    __slots__ = ("handler", "deserialize", "serialize", "client_streaming", "server_streaming", "on_sent",
                 "compress", "in_place", "begin", "max_message_bytes")

    def __init__(
        self,
        handler: Callable[..., Any],
        deserialize: Callable[[Any], Any],
        serialize: Callable[[Any], list[Any]],
        client_streaming: bool = False,
        server_streaming: bool = False,
        on_sent: Callable[[Any], OnSent | None] | None = None,
        compress: bool = False,
        in_place: bool = False,
        begin: Callable[[Any, Context], UnaryPending] | None = None,
        max_message_bytes: Callable[[], int] | None = None,
    ):
        self.handler = handler
        self.deserialize = deserialize
        self.serialize = serialize
        self.client_streaming = client_streaming
        self.server_streaming = server_streaming
        self.on_sent = on_sent
        self.compress = compress
        self.in_place = in_place
        self.begin = begin
        self.max_message_bytes = max_message_bytes


class UnaryPending(Protocol):
    """A unary call `Method.begin` started: once `future` is done, `answer()` returns the response or raises (RpcAbort
    with the call's status, or a bug's exception); `cancel()`: the call is over without an answer (reset, deadline,
    the connection's end), what it holds goes back. `watch(callback)` has `callback(future)` called once `future` is
    done (not when it was cancelled), possibly at once when its result comes instead of from a done callback."""

    future: asyncio.Future[Any]

    def watch(self, callback: Callable[[asyncio.Future[Any]], None]) -> None: ...

    def answer(self) -> Any: ...

    def cancel(self) -> None: ...


class Context:
    """The part of grpc.aio's ServicerContext our servicers use."""

    __slots__ = ("_stream", "_peer", "code", "details")

    def __init__(self, stream: Stream, peer: str):
        self._stream = stream
        self._peer = peer
        self.code: grpc.StatusCode | None = None  # set_code/set_details: the status the call ends with
        self.details = ""

    def invocation_metadata(self) -> tuple[tuple[str, Any], ...]:
        return self._stream.metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        deadline = self._stream.deadline
        return None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())

    def cancelled(self) -> bool:
        return self._stream.reset

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise RpcAbort(code, details)

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    def status(self) -> tuple[grpc.StatusCode, str] | None:
        """The status a handler chose with set_code, if any (grpc's generated base methods do that)."""
        if self.code is None or self.code is grpc.StatusCode.OK:
            return None
        return self.code, self.details
