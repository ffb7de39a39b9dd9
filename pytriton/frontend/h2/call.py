"""gRPC on an HTTP/2 stream: request headers, length-prefixed messages, handlers, status.

Method handlers keep grpc.aio's shape (`await handler(request, context)`, async generators for streams) and the
context offers what our servicers use. A request message's buffer grows as its bytes arrive (never to a length
that was only declared); a large one is received by the socket straight into it, and the connection keeps the
last one for the next message of the same size.

With the core's receive buffers, a large uncompressed infer message goes into server-owned shared memory instead,
which its tensors are then handed to the model from without a copy (`_h2_segments.py`).
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

import grpc

from pytriton.core.received import drop_frames
from pytriton.frontend.h2.head import CallHead
from pytriton.frontend.h2.message import (
    GZIP_THREAD_MIN,
    RpcAbort,
    decompress,
    gzip_message,
    message_size,
)
from pytriton.frontend.h2.method import Context, Method, UnaryPending
from pytriton.frontend.h2.segments import ConnectionSegments
from pytriton.frontend.h2.send import STREAM_SEND_BACKLOG, STREAM_SEND_MESSAGES, run_releases
from pytriton.frontend.h2.stream import HALF_CLOSED_LOCAL, OPEN, OPEN_REPLYING, Stream

if TYPE_CHECKING:
    from pytriton.core.received import ReceivedBuffers
    from pytriton.frontend.h2.connection import GrpcConnection

logger = logging.getLogger("pytriton.frontend")

GROW_MIN = 16 * 1024  # the first buffer of a message whose bytes have not all arrived (it grows as they do)
DIRECT_MIN = 64 * 1024  # a message part at least this large is received by the socket straight into its buffer
SPARE_MAX = 64 << 20  # the most bytes of message buffers a connection keeps for next messages of the same size
SPARES = 4  # and the most buffers (calls in flight on one connection each hold one: perf_analyzer's c=2 holds two)

_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_TIMEOUT = re.compile(r"^(\d{1,8})([HMSmun])$")


class _Answering:
    """What `Stream.task` holds for a call `Method.begin` started (a task's `done` and `cancel`); called when the call's
    future is done, it sends the answer. It lets go of the stream and the call once it has answered or been cancelled
    (no reference cycle keeps the request's buffers)."""

    __slots__ = ("_calls", "_stream", "_method", "_pending")

    def __init__(self, calls: GrpcCalls, stream: Stream, method: Method, pending: UnaryPending):
        self._calls: GrpcCalls | None = calls
        self._stream = stream
        self._method = method
        self._pending: UnaryPending | None = pending

    def done(self) -> bool:
        return self._pending is None

    def cancel(self) -> bool:
        pending, self._pending = self._pending, None
        if pending is None:
            return False
        self._calls = self._stream = None  # type: ignore[assignment]  # let go (see the class doc)
        pending.cancel()
        return True

    def __call__(self, _: Any) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return  # cancelled
        # (type: ignore below: _stream is typed Stream, None once the call lets go of it)
        calls, stream, self._calls, self._stream = self._calls, self._stream, None, None  # type: ignore[assignment]
        assert calls is not None
        try:
            response = pending.answer()
        except RpcAbort as exc:
            drop_frames(exc)
            calls._outbox.finish(stream, exc.code, exc.details)
            return
        except asyncio.CancelledError as exc:  # (its future cancelled by another: as a cancelled handler task)
            drop_frames(exc)
            return
        except Exception as exc:  # noqa: BLE001 - a handler bug answers UNKNOWN, as grpc does
            calls._handler_failed(stream, exc)
            return
        calls._reply(stream, self._method, response, last=True)


def _over(stream: Stream) -> bool:
    """The call is over: its status is queued or sent, or the stream was reset."""
    return stream.trailers is not None or stream.state >= HALF_CLOSED_LOCAL


class GrpcCalls:
    """The gRPC calls of one connection: started by request headers, fed by DATA, ended by END_STREAM."""

    def __init__(self, connection: GrpcConnection, methods: dict[bytes, Method], max_message_bytes: int,
                 max_decompressed_bytes: int | None = None, gzip_level: int | None = None,
                 received: ReceivedBuffers | None = None):
        self._connection = connection
        self._outbox = connection.outbox
        self._loop = connection.loop
        self._methods = methods
        self._max_message = max_message_bytes
        self._max_decompressed = max_decompressed_bytes or max_message_bytes
        self._gzip_level = gzip_level  # the compression of infer responses (None: none)
        self._spares: list[bytearray] = []  # the last large message buffers, for next messages of the same size
        self._segments = ConnectionSegments(received, SPARES, SPARE_MAX) \
            if received is not None and received.enabled else None  # (the same bounds as the spares)

    # ---- a call's start -------------------------------------------------------------------------------------------
    def start(self, stream: Stream, head: CallHead) -> None:
        stream.metadata = head.metadata
        stream.encoding = head.encoding
        stream.content_length = head.content_length
        method = self._methods.get(head.path)
        if method is None:
            self._outbox.finish(stream, grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
            return
        if head.encoding not in (None, "identity", "gzip", "deflate"):
            self._outbox.finish(stream, grpc.StatusCode.UNIMPLEMENTED,
                                f"Compression algorithm '{head.encoding}' is not supported")
            return
        stream.method = method
        stream.context = Context(stream, self._connection.peer)
        if method.compress and head.accept_gzip:
            stream.gzip_level = self._gzip_level
        if head.timeout is not None:
            match = _TIMEOUT.match(head.timeout.decode("latin-1"))
            if match is None:
                self._outbox.finish(stream, grpc.StatusCode.INTERNAL,
                                    f"Invalid grpc-timeout '{head.timeout.decode('latin-1')}'")
                return
            seconds = int(match.group(1)) * _TIMEOUT_UNITS[match.group(2)]
            stream.deadline = self._loop.time() + seconds
            stream.timer = self._loop.call_later(seconds, self._deadline, stream)
        if method.client_streaming:
            stream.queue = asyncio.Queue()
            stream.task = self._loop.create_task(self._run_streaming(stream, method, self._requests(stream)))

    # ---- request messages -------------------------------------------------------------------------------------------
    def feed(self, stream: Stream, data: memoryview) -> None:
        """Append DATA bytes to the stream's messages (5-byte prefix: compressed flag, length)."""
        pos, size = 0, len(data)
        while pos < size:
            if _over(stream):
                return  # the call has ended: what the client still sends is dropped
            body = stream.body
            if body is None:
                if stream.head_fill == 0 and size - pos >= 5:  # the common case: the prefix in one piece
                    flag, length = data[pos], int.from_bytes(data[pos + 1 : pos + 5], "big")
                    pos += 5
                else:
                    take = min(5 - stream.head_fill, size - pos)
                    stream.head[stream.head_fill : stream.head_fill + take] = data[pos : pos + take]
                    stream.head_fill += take
                    pos += take
                    if stream.head_fill < 5:
                        return
                    stream.head_fill = 0
                    flag, length = stream.head[0], int.from_bytes(stream.head[1:5], "big")
                method = stream.method
                limit = self._max_message
                if method is not None and method.max_message_bytes is not None:
                    limit = min(limit, method.max_message_bytes())
                if length > limit:
                    self._outbox.finish(stream, grpc.StatusCode.RESOURCE_EXHAUSTED,
                                        f"Received message larger than max ({length} vs. {limit})")
                    return
                stream.compressed = bool(flag & 1)
                if size - pos >= length and length < DIRECT_MIN:
                    self._deliver(stream, bytes(data[pos : pos + length]))
                    pos += length
                    continue
                in_place = method is not None and method.in_place and not stream.compressed
                stream.body = self._message_buffer(length, size - pos, in_place)
                stream.fill = 0
                stream.expect = length
                if not length:
                    self._complete(stream)
                continue
            take = min(stream.expect - stream.fill, size - pos)
            end = stream.fill + take
            if end > len(body):
                body = self._grow(stream, end)
            body[stream.fill : end] = data[pos : pos + take]
            stream.fill = end
            pos += take
            if end == stream.expect:
                self._complete(stream)

    def direct_view(self, stream: Stream, available: int) -> memoryview | None:
        """Where the socket may write the next `available` bytes of the stream's message itself (at least
        DIRECT_MIN of them, within the message), or None. The buffer grows to hold at most what has arrived
        plus as much again (or DIRECT_MIN)."""
        body = stream.body
        if body is None or _over(stream):
            return None
        fill = stream.fill
        want = min(available, stream.expect - fill)
        if want < DIRECT_MIN:
            return None
        if len(body) - fill < DIRECT_MIN:
            body = self._grow(stream, fill + min(want, max(fill, DIRECT_MIN)))
        return memoryview(body)[fill : fill + min(len(body) - fill, want)]

    def direct_received(self, stream: Stream, nbytes: int) -> None:
        stream.fill += nbytes
        if stream.fill == stream.expect:
            self._complete(stream)

    def _message_buffer(self, length: int, available: int, in_place: bool = False) -> bytearray | memoryview:
        """A message's first buffer: a receive segment (see the module's text), or one of the connection's spares
        when it has this size and nothing refers to it any more (clients send same-sized tensors over and over),
        else what has arrived of it, at least GROW_MIN."""
        if in_place and self._segments is not None:
            segment = self._segments.take(length)
            if segment is not None:
                self._spares = [spare for spare in self._spares if len(spare) != length]  # (it takes their place)
                return segment
        if DIRECT_MIN <= length <= SPARE_MAX:
            for spare in self._spares:
                if len(spare) == length and sys.getrefcount(spare) == 3:  # the list, `spare`, the argument
                    return spare
        return bytearray(min(length, max(available, GROW_MIN)))

    @property
    def spare(self) -> object | None:
        """The most recent spare message buffer or receive segment (None when the connection keeps none)."""
        segments = self._segments.segments if self._segments is not None else None
        return self._spares[-1] if self._spares else segments[-1] if segments else None

    def drop_spares(self) -> None:
        self._spares.clear()
        if self._segments is not None:
            self._segments.drop()

    def _keep_spare(self, body: bytearray) -> None:
        spares = self._spares
        for i, spare in enumerate(spares):
            if spare is body:
                del spares[i]
                break
        spares.append(body)
        total = sum(len(spare) for spare in spares)
        while len(spares) > SPARES or total > SPARE_MAX:
            total -= len(spares.pop(0))

    def _grow(self, stream: Stream, end: int) -> bytearray:
        """Grow the message buffer to hold `end` bytes, at most doubling what has arrived (at least GROW_MIN)."""
        body = stream.body
        assert isinstance(body, bytearray)  # (a receive segment has its whole length from the start)
        size = min(stream.expect, max(end, stream.fill + max(stream.fill, GROW_MIN)))
        try:
            body += bytes(size - len(body))  # in place (no copy of what is there for large buffers)
        except BufferError:  # something still holds a view of it
            grown = bytearray(size)
            grown[: stream.fill] = memoryview(body)[: stream.fill]
            stream.body = body = grown
        return body

    def _complete(self, stream: Stream) -> None:
        body, stream.body = stream.body, None
        assert body is not None
        if self._segments is not None:
            self._segments.arrived(body)
        if isinstance(body, bytearray) and DIRECT_MIN <= len(body) <= SPARE_MAX:
            self._keep_spare(body)
        self._deliver(stream, body)

    def _deliver(self, stream: Stream, message: Any) -> None:
        if _over(stream):
            return
        size = len(message) + 5  # on the wire, as flow control counted it
        if stream.compressed:
            limit = self._max_decompressed
            if stream.method is not None and stream.method.max_message_bytes is not None:
                limit = min(limit, stream.method.max_message_bytes())
            try:
                message = decompress(message, stream.encoding, limit)
            except RpcAbort as exc:
                self._outbox.finish(stream, exc.code, exc.details)
                return
        if stream.queue is not None:
            stream.held += size  # its window goes back when the handler takes it (`_requests`)
            stream.queue.put_nowait((message, size))
        elif stream.messages:  # a second message on a unary call: no need to wait for more
            self._outbox.finish(stream, grpc.StatusCode.UNIMPLEMENTED, "expected exactly one request message")
            stream.messages.clear()
        else:
            stream.messages.append(message)

    def end(self, stream: Stream) -> None:
        """The request is complete (END_STREAM): a unary call runs now."""
        if _over(stream):
            return
        if stream.queue is not None:
            stream.queue.put_nowait(None)
            return
        method = stream.method
        if method is None:
            return
        if stream.body is not None or stream.head_fill:
            self._outbox.finish(stream, grpc.StatusCode.INTERNAL, "the request ended inside a message")
            return
        if not stream.messages:
            self._outbox.finish(stream, grpc.StatusCode.INTERNAL, "no request message")
            return
        try:
            request = method.deserialize(stream.messages.pop())
        except Exception:  # noqa: BLE001 - the client sent something protobuf cannot read
            self._outbox.finish(stream, grpc.StatusCode.INTERNAL, "Exception deserializing request!")
            return
        if method.server_streaming:
            stream.task = self._loop.create_task(self._run_streaming(stream, method, request))
        elif method.begin is not None and stream.gzip_level is None:
            self._begin(stream, method, method.begin, request)
        else:
            stream.task = self._loop.create_task(self._run_unary(stream, method, request))

    def _begin(self, stream: Stream, method: Method, begin: Callable[[Any, Context], UnaryPending],
               request: Any) -> None:  # fmt: skip
        """A unary call answered from a callback when its future is done: no task, no coroutine per request."""
        try:
            pending = begin(request, stream.context)  # type: ignore[arg-type]  # set on an open stream
        except RpcAbort as exc:
            drop_frames(exc)
            self._outbox.finish(stream, exc.code, exc.details)
            return
        except Exception as exc:  # noqa: BLE001 - a handler bug answers UNKNOWN, as grpc does
            self._handler_failed(stream, exc)
            return
        answering = _Answering(self, stream, method, pending)
        stream.task = answering
        pending.watch(answering)  # (answered in the loop pass its result arrives in)

    async def _requests(self, stream: Stream) -> AsyncIterator[Any]:
        queue, method = stream.queue, stream.method
        connection = self._connection
        while True:
            item = await queue.get()  # type: ignore[union-attr]  # a streaming call's queue
            if item is None:
                return
            message, size = item
            stream.held -= size
            if stream.state == OPEN or stream.state == OPEN_REPLYING:  # the client may still send
                connection.return_window(stream)
            try:
                request = method.deserialize(message)  # type: ignore[union-attr]  # set on an open stream
            except Exception:  # noqa: BLE001
                raise RpcAbort(grpc.StatusCode.INTERNAL, "Exception deserializing request!") from None
            yield request

    # ---- handlers -----------------------------------------------------------------------------------------------
    async def _run_unary(self, stream: Stream, method: Method, request: Any) -> None:
        try:
            try:
                response = await method.handler(request, stream.context)
            except RpcAbort as exc:
                drop_frames(exc)  # (the request's buffers are free at once)
                self._outbox.finish(stream, exc.code, exc.details)
                return
            except asyncio.CancelledError as exc:
                drop_frames(exc)
                return  # reset by the client, past its deadline, or the server is stopping
            except Exception as exc:  # noqa: BLE001 - a handler bug answers UNKNOWN, as grpc does
                self._handler_failed(stream, exc)
                return
            self._reply(stream, method, response, last=True)
            await self._send_gzip(stream, last=True)
        finally:
            stream.context = None  # (the call is over: no Stream <-> Context cycle left to the collector)

    def _reply(self, stream: Stream, method: Method, response: Any, last: bool = False) -> None:
        """Send a handler's response; whatever happens, its buffers are given back exactly once."""
        on_sent = method.on_sent(response) if method.on_sent is not None and response is not None else None
        try:
            chosen = stream.context.status() if last else None  # type: ignore[union-attr]  # set on an open stream
            if chosen is not None:
                raise RpcAbort(*chosen)
            if response is None:
                raise RpcAbort(grpc.StatusCode.INTERNAL, "the method returned no response")
            parts = method.serialize(response)
        except RpcAbort as exc:
            run_releases([on_sent] if on_sent is not None else [])
            self._outbox.finish(stream, exc.code, exc.details)
            return
        except Exception as exc:  # noqa: BLE001
            run_releases([on_sent] if on_sent is not None else [])
            self._handler_failed(stream, exc)
            return
        if stream.gzip_level is None:
            self._outbox.message(stream, parts, on_sent, last=last)
            return
        stream.gzip = (parts, on_sent)  # for `_send_gzip`, which the handler's task awaits next

    async def _send_gzip(self, stream: Stream, last: bool = False) -> None:
        """Send the response `_reply` left, gzip-compressed (a large one in a thread); the response's own buffers
        go back once it is compressed."""
        if stream.gzip is None:
            return
        (parts, on_sent), stream.gzip = stream.gzip, None
        release = [on_sent] if on_sent is not None else []
        size, level = message_size(parts), stream.gzip_level
        assert level is not None
        if size < GZIP_THREAD_MIN:
            data = gzip_message(parts, level, size)
        else:
            job = self._loop.run_in_executor(None, gzip_message, parts, level, size)
            try:
                data = await asyncio.shield(job)
            except asyncio.CancelledError:  # the thread still reads the buffers: they go back once it is done
                job.add_done_callback(lambda _: run_releases(release))
                raise
            except BaseException:
                run_releases(release)
                raise
        if data is None:  # it would not shrink: as it is
            self._outbox.message(stream, parts, on_sent, last=last)
            return
        run_releases(release)
        self._outbox.message(stream, [data], None, last=last, compressed=True)

    async def _run_streaming(self, stream: Stream, method: Method, request: Any) -> None:
        try:
            await self._stream_responses(stream, method, request)
        finally:
            stream.context = None  # (the call is over: no Stream <-> Context cycle left to the collector)

    async def _stream_responses(self, stream: Stream, method: Method, request: Any) -> None:
        responses = method.handler(request, stream.context)
        try:
            async for response in responses:
                self._reply(stream, method, response)
                await self._send_gzip(stream)
                if (stream.pending_size > STREAM_SEND_BACKLOG or stream.pending_messages > STREAM_SEND_MESSAGES) \
                        and not _over(stream):
                    stream.drained = self._loop.create_future()
                    await stream.drained
                if _over(stream):
                    return
        except RpcAbort as exc:
            drop_frames(exc)
            self._outbox.finish(stream, exc.code, exc.details)
            return
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001
            self._handler_failed(stream, exc)
            return
        finally:
            await responses.aclose()
        chosen = stream.context.status()  # type: ignore[union-attr]  # set on an open stream
        self._outbox.finish(stream, *(chosen or (grpc.StatusCode.OK, "")))

    def _handler_failed(self, stream: Stream, exc: Exception) -> None:
        """A handler raised: the status it chose with set_code, else UNKNOWN as grpc answers (and a log entry)."""
        chosen = stream.context.status()  # type: ignore[union-attr]  # set on an open stream
        if chosen is None:
            logger.exception("gRPC method failed")
        self._outbox.finish(stream, *(chosen or (grpc.StatusCode.UNKNOWN, f"Unexpected {type(exc)}: {exc}")))

    def _deadline(self, stream: Stream) -> None:
        stream.timer = None
        if stream.state >= HALF_CLOSED_LOCAL:
            return  # our END_STREAM is out, or the stream was reset
        task = stream.task
        self._outbox.drop(stream)  # what the client's windows still hold back will not be sent,
        stream.trailers = None  # nor a status waiting behind it
        self._outbox.finish(stream, grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
        if task is not None and not task.done():
            task.cancel()
