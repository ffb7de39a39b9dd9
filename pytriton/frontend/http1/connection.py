"""One HTTP/1.1 client connection on asyncio + httptools (the parser uvicorn uses), without a framework.

Keep-alive, pipelining (answers leave in request order), chunked request bodies (decoded by the parser) and
Content-Length answers; one handler coroutine answers every request. `RequestReader` turns bytes into requests
under the limits; this half answers them and keeps the connection to its deadlines:

- Time: the listener's tick gives every connection the time; past its deadline a connection closes when idle,
  answers 408 when a head or body is late, and drops the connection when the client does not take an answer.
- Refusals (400, 408, 413, 431: a request not read to its end) close the connection the way common servers do
  (nginx, Apache: a "lingering close"): once the answer is sent the connection shuts its sending side, so the client
  reads the answer and then the end, and drops unparsed whatever the client still sends, until the client closes or
  `LINGER_S` pass. Closing at once while a client still sends would reset the connection, and a client still
  writing its body (http.client, tritonclient) would fail on its write instead of reading the answer.
- Answers: the next pipelined request waits while more than `WRITE_HIGH` bytes of answers are unsent, and the
  connection stops reading while more than `max_pipelined` requests wait (memory bound: those requests, and
  one answer past `WRITE_HIGH`).
- Memory: a request's body stays charged to the listener's budget while it waits and while its handler runs; a
  connection waiting for memory (`_waiting`) does not read, and its head or body cannot be late meanwhile (the
  server stopped it, not the client): its deadline starts again when it reads again.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any

from pytriton.config.http1 import HttpLimits
from pytriton.frontend._socket_write import DirectWriteTransport
from pytriton.frontend.http1.budget import BufferBudget
from pytriton.frontend.http1.chunked import LAST_CHUNK, chunk, chunked_head
from pytriton.frontend.http1.messages import (
    Begin,
    Handler,
    HttpRequest,
    HttpResponse,
    PendingAnswer,
    error_response,
    write_response,
)
from pytriton.frontend.http1.reader import (
    BODY,
    DIRECT,
    DONE,
    HEAD,
    IDLE,
    WAIT_BODY,
    WAIT_HEAD,
    WAIT_IDLE,
    WAIT_LINGER,
    RequestReader,
    SharedReadBuffer,
)
from pytriton.frontend.tls import unsent_bytes

logger = logging.getLogger("pytriton.frontend")

# While more answer bytes than this wait in the transport (a client that does not read), the next request waits.
WRITE_HIGH = 256 * 1024
# A connection idle this long drops the spare body buffer it keeps for the next same-sized body.
SPARE_KEEP_S = 2.0
# After a refusal's answer, what the client still sends is dropped for at most this long (from the answer on, however
# fast it comes), then the connection is closed. nginx lingers up to 30 s (5 s without a byte), Apache up to 30 s
# (2 s without a byte); this is their bound between reads, kept as the whole bound.
LINGER_S = 5.0


class _Due:
    """`HttpConnection.task` while `_advance` is due at the end of the read being parsed."""

    __slots__ = ()

    def cancel(self) -> bool:
        return False


_DUE = _Due()


class _Answering:
    """What `HttpConnection.task` holds while a request `begin` started waits for its answer (a task's `done` and
    `cancel`); called when the answer's future is done, it has the connection send it. Either way the request's body
    charge goes back exactly once, and the request is let go of with it: a closed connection is only freed by the
    cyclic collector (rarely, under `gc.freeze` and a raised threshold), and its body must not wait for that past the
    budget's charge (a hang-up storm kept ~170 such 1 MiB bodies)."""

    __slots__ = ("_connection", "_request", "_keep_alive", "_charge", "_pending")

    def __init__(self, connection: HttpConnection, request: HttpRequest, keep_alive: int, charge: int,
                 pending: PendingAnswer):  # fmt: skip
        self._connection: HttpConnection | None = connection
        self._request: HttpRequest | None = request
        self._keep_alive = keep_alive
        self._charge = charge
        self._pending: PendingAnswer | None = pending

    def done(self) -> bool:
        return self._pending is None

    def cancel(self) -> bool:
        """The connection ended: the request is withdrawn and its body released (a cancelled handler task's end)."""
        pending, self._pending = self._pending, None
        if pending is None:
            return False
        connection, self._connection = self._connection, None
        request, self._request = self._request, None
        assert connection is not None and request is not None
        try:
            pending.cancel()
        finally:
            connection._request_done(request.body, self._charge)
        return True

    def __call__(self, _: Any) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return  # cancelled
        connection, self._connection = self._connection, None
        request, self._request = self._request, None
        assert connection is not None and request is not None
        try:
            response = pending.answer()
        except Exception as exc:  # noqa: BLE001 - a bug in the answer must not kill the connection
            logger.exception("HTTP handler failed for %s %s", request.method, request.path)
            response = error_response(500, f"internal error: {exc}")
        finally:
            connection._request_done(request.body, self._charge)
        connection.task = None
        if connection._answer(request, response, self._keep_alive):
            connection._advance()


class HttpConnection(RequestReader):
    """One client connection."""

    __slots__ = (
        "_after_drain",
        "begin",
        "_drained",
        "_holding",
        "_idle_since",
        "_pending_seen",
        "_reading",
        "_wait",
        "connections",
        "handler",
        "paused",
        "peer",
        "queue",
        "refusal",
        "send_deadline",
        "task",
        "transport",
        "_writer",
    )

    def __init__(
        self,
        handler: Handler,
        limits: HttpLimits,
        read_buffer: SharedReadBuffer,
        connections: set[HttpConnection] | None = None,
        too_large_hint: str = "",
        budget: BufferBudget | None = None,
        begin: Begin | None = None,
    ):
        super().__init__(limits, read_buffer, too_large_hint, budget)
        self.handler = handler
        self.refusal: Callable[[int, str], HttpResponse] = error_response  # the answer to a request refused unread (413, 408, 431): (status, message)
        self.begin = begin  # answers what it can without the handler's coroutine (`_advance`)
        self._reading = False  # in `buffer_updated`: a request read now is begun at the end of the read
        self.connections = connections  # the listener's registry of open connections
        self.transport: asyncio.Transport | None = None
        self._writer: DirectWriteTransport | None = None  # the transport, with large answers written uncopied
        # Requests (and refusals) in order, answered one by one, with keep-alive and the bytes their body is charged;
        # a list: at most `max_pipelined` + 1, and an idle connection's empty deque would cost 760 bytes.
        self.queue: list[tuple[HttpRequest | HttpResponse, int, int]] = []
        # What answers the queue: the task running `_run`, the `_advance` call due, or the `_Answering` of a request
        # `begin` started; None when nothing does.
        self.task: Any = None
        self.paused = False  # reading paused: too many requests wait
        self.peer: str | None = None
        self.send_deadline = math.inf  # loop time by which the client must have taken some of its answers
        self._wait = WAIT_IDLE
        self._pending_seen = 0  # unsent answer bytes when `send_deadline` was set
        self._idle_since = 0.0
        self._holding = False  # the transport holds unsent data (between pause_writing and resume_writing)
        self._after_drain: list[Callable[[], None]] = []  # on_sent of answers whose buffers the transport holds
        self._drained: asyncio.Future[Any] | None = None  # set when the transport has sent everything

    # ---- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = self._writer = DirectWriteTransport(transport)  # type: ignore[arg-type]  # a server Transport
        peername = transport.get_extra_info("peername")
        self.peer = peername[0] if isinstance(peername, tuple) else ("" if peername is not None else None)
        if self.connections is not None:
            self.connections.add(self)
        # pause_writing/resume_writing then tell when the transport holds data and when it has sent it all.
        transport.set_write_buffer_limits(high=0)  # type: ignore[attr-defined]  # a server's has it
        self._go_idle()

    def buffer_updated(self, nbytes: int) -> None:
        self._reading = True
        try:
            RequestReader.buffer_updated(self, nbytes)
        finally:
            self._reading = False
        if self.task is _DUE:
            self._advance()

    def pause_writing(self) -> None:
        """The transport holds unsent data (write buffer limits are 0: this comes with the first byte)."""
        if self._writer is None or self._writer.paused():
            self._holding = True

    def resume_writing(self) -> None:
        """The transport's buffer is empty (and the writer's queue): the tensors it was sending from may go back to
        their owners."""
        if self._writer is not None and not self._writer.resumed():
            return
        self._holding = False
        self._run_after_drain()

    def _run_after_drain(self) -> None:
        callbacks, self._after_drain = self._after_drain, []
        for callback in callbacks:
            callback()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self._writer is not None:
            self._writer.lost()
        self.deadline = self.send_deadline = math.inf
        self._release_all()
        if self.connections is not None:
            self.connections.discard(self)
        task, self.task = self.task, None
        if task is not None:
            task.cancel()  # the request in its handler is released (when the task ends)
        for item, _, charge in self.queue:
            if isinstance(item, HttpResponse) and item.on_sent:
                item.on_sent()
            elif charge:
                self.budget.release(charge)
        self.queue.clear()
        self._run_after_drain()

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` after the requests already read, then close; read nothing more."""
        self._phase = DONE
        self._release_all()
        self.deadline = math.inf
        self._enqueue(self.refusal(status, message), keep_alive=False)
        if self.transport is not None:
            self.transport.pause_reading()

    # ---- deadlines ---------------------------------------------------------------------------
    def _set_deadline(self, wait: int, seconds: float) -> None:
        """Start the time the client has for what the connection waits for (`wait`: its head, body, next request)."""
        self._wait = wait
        # Not reading (too many requests wait, or memory): the client cannot be late; `_rearm` sets it when reading
        # again.
        self.deadline = math.inf if self.paused or self._waiting else self._now + seconds

    def _go_idle(self) -> None:
        self._idle_since = self.loop.time()
        self._wait = WAIT_IDLE
        self.deadline = self._idle_since + self.limits.idle_timeout_s

    def _rearm(self) -> None:
        """After a pause in reading: the head or body under way gets its full time again."""
        self._now = self.loop.time()
        if self._phase == HEAD:
            self._set_deadline(WAIT_HEAD, self.limits.header_timeout_s)
        elif self._phase in (BODY, DIRECT):
            self._set_deadline(WAIT_BODY, self.limits.body_timeout_s)
        elif self._phase == IDLE and self.task is None and not self.queue:
            self._go_idle()  # nothing under way: the next request has the idle timeout
        else:
            self.deadline = math.inf  # requests are being answered

    def _stop_reading(self) -> None:
        self.deadline = math.inf  # not reading: the client cannot be late
        if self.transport is not None:
            self.transport.pause_reading()

    def _resume(self) -> None:
        """The budget charged what this connection waited for: read again, unless too many requests wait."""
        if not self.paused and self._phase != DONE and self.transport is not None:
            self.transport.resume_reading()
            self._rearm()

    def _expect_sent(self) -> None:
        """Answers wait in the transport: the client has to keep taking them."""
        assert self.transport is not None
        self._pending_seen = unsent_bytes(self.transport)
        self.send_deadline = self.loop.time() + self.limits.body_timeout_s

    def tick(self, now: float) -> None:
        """The listener's periodic call: act on a passed deadline; drop the spare body buffer when idle."""
        if now >= self.deadline or now >= self.send_deadline:
            self._deadline_passed(now)
        elif self._spare is not None and self._wait == WAIT_IDLE and now - self._idle_since >= SPARE_KEEP_S:
            self._drop_spare()

    def _deadline_passed(self, now: float) -> None:
        transport = self.transport
        if transport is None:
            return
        if now >= self.send_deadline:
            pending = unsent_bytes(transport)
            if not pending:
                self.send_deadline = math.inf
            elif pending != self._pending_seen:  # the client is taking its answers, slowly
                self._expect_sent()
            else:
                logger.debug("HTTP client %s does not take its answer; dropping the connection", self.peer)
                transport.abort()
                return
        if now < self.deadline:
            return
        wait, self.deadline = self._wait, math.inf
        if wait == WAIT_LINGER:
            transport.close()  # (what it still has to send is bound by the send deadline, as for any answer)
            return
        if wait == WAIT_IDLE:
            if not transport.get_write_buffer_size():
                transport.close()
                return
            self._go_idle()  # still sending its last answer: not idle yet
            if self.send_deadline == math.inf:
                self._expect_sent()
        elif wait == WAIT_HEAD:
            timeout = self.limits.header_timeout_s
            self._refuse(408, f"request header not received within {timeout:g} s. "
                              "Use --http-header-timeout to increase the limit.")
        else:
            timeout = self.limits.body_timeout_s
            self._refuse(408, f"request body: no data received for {timeout:g} s. "
                              "Use --http-body-timeout to increase the limit.")

    # ---- request pipeline --------------------------------------------------------------------
    def _enqueue(self, item: HttpRequest | HttpResponse, keep_alive: int, charge: int = 0) -> None:
        self.queue.append((item, keep_alive, charge))
        if len(self.queue) > self.limits.max_pipelined and self.transport is not None and not self.paused:
            self.paused = True
            self.transport.pause_reading()
            if self._phase != DONE:
                self.deadline = math.inf  # not reading: the client cannot be late
        if self.task is None:
            if self.begin is None:
                self.task = self.loop.create_task(self._run())
            elif self._reading:  # once the whole read is parsed
                self.task = _DUE
            else:  # (as a task's first step would: after this callback)
                self.task = self.loop.call_soon(self._advance)

    def _advance(self) -> None:
        """Answer the queue in order without a task while `begin` can: answers it gives at once are sent, one it
        has to wait for is sent from its future's callback (`_Answering`), which goes on from there. A request `begin`
        leaves to the handler, or answers the client does not take, hand the rest of the queue to a task (`_run`)."""
        self.task = None
        begin = self.begin
        assert begin is not None
        queue = self.queue
        while queue and self.transport is not None:
            if self._holding and self.transport.get_write_buffer_size() > WRITE_HIGH:
                break
            item, keep_alive, charge = queue[0]
            if isinstance(item, HttpResponse):
                queue.pop(0)
                if not self._answer(item, item, keep_alive):
                    return
                continue
            try:
                started = begin(item)
            except Exception as exc:  # noqa: BLE001 - a handler bug must not kill the connection
                logger.exception("HTTP handler failed for %s %s", item.method, item.path)
                started = error_response(500, f"internal error: {exc}")
            if started is None:
                break
            queue.pop(0)
            if isinstance(started, HttpResponse):
                self._request_done(item.body, charge)
                if not self._answer(item, started, keep_alive):
                    return
                continue
            answering = _Answering(self, item, keep_alive, charge, started)
            self.task = answering
            started.watch(answering)  # (answered in the loop pass its result arrives in)
            return
        if queue and self.transport is not None:
            self.task = self.loop.create_task(self._run())
        else:
            self._answered_all()

    def _answered_all(self) -> None:
        if (self._phase == IDLE and not self.queue and not self._waiting and self.transport
                and not self.transport.is_closing()):
            self._go_idle()

    def _answer(self, item: HttpRequest | HttpResponse, response: HttpResponse, keep_alive: int) -> bool:
        """Send `item`'s answer; False when the connection ends with it (no keep-alive)."""
        head = isinstance(item, HttpRequest) and item.method == "HEAD"
        if response.close:
            keep_alive = False
        self._send(response, keep_alive, head)
        return self._answered(keep_alive)

    def _answered(self, keep_alive: int) -> bool:
        """An answer went out: close without keep-alive, else read again if too many requests had waited."""
        if not keep_alive:
            if self.transport is not None:
                if self._phase == DONE and self.transport.can_write_eof():
                    self._linger()
                else:
                    self.transport.close()  # after what is unsent: the client has a while to take it
                self._expect_sent()
            return False
        if self.paused and len(self.queue) <= self.limits.max_pipelined // 2 and self._phase != DONE:
            assert self.transport is not None  # paused: the connection is open (else the task is cancelled)
            self.paused = False
            if not self._waiting:
                self.transport.resume_reading()
                self._rearm()
        return True

    def _linger(self) -> None:
        """A refused request's answer is out: end the sending side after it (the client reads the answer, then the
        end) and drop, unparsed (the reader is done), what the client still sends: the connection closes when the
        client closes its side (asyncio closes the transport at its end), else at `LINGER_S`."""
        transport = self.transport
        assert transport is not None
        transport.write_eof()  # after what is unsent
        self.paused = False
        transport.resume_reading()
        self._wait = WAIT_LINGER
        self.deadline = self.loop.time() + LINGER_S

    async def _run(self) -> None:
        hand_back = False
        try:
            while self.queue and self.transport is not None:
                if self._holding and self.transport.get_write_buffer_size() > WRITE_HIGH:
                    await self._drain()  # the client does not take its answers: read and answer no more
                    continue
                item, keep_alive, charge = self.queue.pop(0)
                if isinstance(item, HttpResponse):
                    response = item
                else:
                    try:
                        response = await self.handler(item)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # a handler bug must not kill the connection
                        logger.exception("HTTP handler failed for %s %s", item.method, item.path)
                        response = error_response(500, f"internal error: {exc}")
                    finally:
                        self._request_done(item.body, charge)
                if response.stream is not None:
                    plain = isinstance(item, HttpRequest) and item.http10  # (its body ends when the connection does)
                    if not await self._send_stream(response, False if response.close or plain else keep_alive,
                                                   chunked=not plain):
                        return
                elif not self._answer(item, response, keep_alive):
                    return
                if self.begin is not None:  # the rest goes back to `_advance` (begun requests need no task)
                    hand_back = True
                    return
        finally:
            self.task = None
            if hand_back:
                self._advance()
            else:
                self._answered_all()

    async def _send_stream(self, response: HttpResponse, keep_alive: int, chunked: bool = True) -> bool:
        """Send an answer whose body its stream yields, in chunks (chunked.py): the next part is taken only while less
        than `WRITE_HIGH` bytes wait unsent (a client that takes nothing for the body timeout is dropped, see
        `_drain`); the stream is closed however this ends (a lost connection cancels this task). False when the
        connection ends with it. Not `chunked` (an HTTP/1.0 client, which cannot read chunks: RFC 9112 section 6.1):
        the parts are sent as they are and the body ends when the connection closes (`keep_alive` false)."""
        stream = response.stream
        assert stream is not None
        finished = False
        try:
            if self.transport is None:
                return False
            self.transport.write(chunked_head(response.status, response.headers, keep_alive, chunked))
            try:
                async for data in stream:
                    if self.transport is None:
                        return False
                    if data:
                        self.transport.write(chunk(data) if chunked else data)
                    if self._holding and self.transport.get_write_buffer_size() > WRITE_HIGH:
                        await self._drain()
            except Exception:  # a bug in the stream must not kill the connection's task; its body ends unfinished
                logger.exception("HTTP streamed answer failed")
                return False
            if self.transport is None:
                return False
            if chunked:
                self.transport.write(LAST_CHUNK)
            finished = True
        finally:
            await stream.aclose()
            if response.on_sent is not None:
                response.on_sent()
            if not finished and self.transport is not None:
                self.transport.abort()  # (the stream failed half-way: its body cannot be ended well)
        if self.send_deadline == math.inf and self.transport is not None and unsent_bytes(self.transport):
            self._expect_sent()
        return self._answered(keep_alive)

    async def _drain(self) -> None:
        self._drained = self.loop.create_future()
        self._expect_sent()
        try:
            await self._drained
        finally:
            self._drained = None
            self.send_deadline = math.inf

    def _send(self, response: HttpResponse, keep_alive: int, head: bool) -> None:
        transport = self.transport
        by_reference = False
        try:
            if transport is not None:
                by_reference = write_response(transport, response, keep_alive, head)
        finally:
            if self.send_deadline == math.inf and transport is not None and unsent_bytes(transport):
                self._expect_sent()  # an answer left unsent: the client must take it within the body timeout
            if response.on_sent is not None:
                # What the socket did not take at once waits by reference (the writer's queue, or asyncio's buffer on
                # Python 3.12), so the tensor's owner waits until nothing is left to send.
                if by_reference and transport is not None and self._holding:
                    self._after_drain.append(response.on_sent)
                else:
                    response.on_sent()
